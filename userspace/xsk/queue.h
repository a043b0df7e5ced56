// The AF_XDP sockets of one RX queue: a primary and a backup socket bound to
// (ifindex, queue), sharing one UMEM and its single fill ring, inserted into
// the XSKMAP at NPF_XSK_PRIMARY(q) / NPF_XSK_BACKUP(q).
//
// Threads: the primary RX ring is consumed by the queue's worker
// (pollPrimary), the backup RX ring by the pager (peekBackup +
// releaseBackup). Both give frames back through Umem::recycle (see umem.h
// for why that is safe). Control-plane calls (constructor, stats) may run on
// any thread.
#pragma once

#include <poll.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "npf/abi.h"
#include "xsk/config.h"
#include "xsk/meta.h"
#include "xsk/socket.h"
#include "xsk/umem.h"

// Linux 6.6 uapi (Debian's headers are 6.1): xdp_desc.options of a
// descriptor whose packet goes on in the next descriptor (multi-buffer).
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

namespace npf::xsk {

// Descriptors (frames) one packet may span. In copy mode a 2 KiB frame with
// no UMEM headroom (npf's) holds 1792 packet bytes, so NPF_MAX_PAYLOAD plus
// headers takes 6 (3 of 4 KiB); a packet that needs more than kMaxFrags is
// dropped as a bad descriptor.
inline constexpr uint32_t kMaxFrags = 8;

// A run of a datagram's payload inside one UMEM frame.
struct PayloadPiece {
    const uint8_t* data;
    uint32_t len;
};

// A packet whose meta passed validateMeta. A packet larger than a UMEM frame
// (jumbo frames; sockets bound with XDP_USE_SG) spans several frames: its
// payload is then in several pieces. xsk/payload.h copies and sums them.
struct RxPacket {
    npf_meta meta;          // validated copy
    const uint8_t* payload; // first payload byte, in the first frame (== piece[0].data)
    uint32_t tail;          // TRUNCATED: datagram bytes after those meta.len (for its checksum)
    uint64_t frame;         // UMEM address of the first frame (== frames[0])
    uint32_t queue;
    // The meta.len + tail payload bytes, in order: one piece unless the
    // packet spans several frames.
    uint32_t pieces;
    std::array<PayloadPiece, kMaxFrags> piece;
    // Every frame of the packet: what releaseBackup takes.
    uint32_t nframes;
    std::array<uint64_t, kMaxFrags> frames;
};

inline constexpr size_t kMetaStatusCount = size_t(MetaStatus::Count);
inline constexpr uint32_t kMaxBatch = 64;

// Counters of one RX ring; single writer (worker or pager), read by anyone.
struct RingCounters {
    std::atomic<uint64_t> packets{0}; // frames with a valid meta handed to the sink
    std::atomic<uint64_t> bytes{0};   // their meta.len
    std::array<std::atomic<uint64_t>, kMetaStatusCount> badMeta{}; // dropped, by reason (index 0 unused)
};

// Plain snapshot of a queue's counters.
struct QueueStats {
    uint32_t queue = 0;
    bool zeroCopy = false;
    uint64_t umemBytes = 0; // pinned
    uint64_t rxPrimary = 0, rxBackup = 0, bytesPrimary = 0, bytesBackup = 0;
    std::array<uint64_t, kMetaStatusCount> badMetaPrimary{}, badMetaBackup{};
    uint64_t backupHeld = 0;    // backup frames the pager has not released
    uint64_t recycled = 0;      // frames given back to the fill ring
    uint64_t fillEmpty = 0;     // recycles that found the fill ring drained
    uint64_t fillStashed = 0;   // frames that found the fill ring full (should stay 0)
    uint64_t wakeupKicks = 0;   // need_wakeup syscalls
    xdp_statistics kernelPrimary{}, kernelBackup{};

    uint64_t badMeta() const noexcept
    {
        uint64_t s = 0;
        for (size_t i = 1; i < kMetaStatusCount; i++)
            s += badMetaPrimary[i] + badMetaBackup[i];
        return s;
    }
};

// "xsk <role> of queue <q> (ifindex <i>)", for messages and logs.
std::string queueName(const QueueConfig& cfg, const std::string& role);
// Throws EINVAL naming the queue if cfg.queue is not one XDP can steer to.
void checkQueueIndex(const QueueConfig& cfg);

class QueueSockets {
public:
    // Creates the UMEM and both sockets, binds them to (cfg.ifindex,
    // cfg.queue) and, if xskmapFd >= 0, inserts them into the XSKMAP
    // (primary first: XDP uses a queue only once both slots are filled).
    // `flows` must outlive this object. Must run in the interface's netns.
    QueueSockets(const QueueConfig& cfg, const FlowSet& flows, int xskmapFd);
    // The sockets of a queue another process made, bound and put in the
    // XSKMAP (npfd's delegated mode, handover.h): `cfg` as it bound them,
    // `umem` the memfd of their UMEM's frames, `primary` the socket the UMEM
    // is registered on. Maps the rings and the frames (read-only) and puts
    // every frame on the fill ring; needs no privilege.
    QueueSockets(Adopt, const QueueConfig& cfg, const FlowSet& flows, Fd umem, Fd primary, Fd backup);
    QueueSockets(const QueueSockets&) = delete;
    QueueSockets& operator=(const QueueSockets&) = delete;

    // Worker, hot path: consumes up to `max` (<= kMaxBatch) primary
    // descriptors, whole packets only (a multi-buffer packet that does not
    // fit waits for the next call, unless it is the first); calls
    // sink(const RxPacket&) for each valid packet -- or, if the sink takes
    // std::span<const RxPacket>, once with all of them (the payload pointers
    // are valid only during the call) -- counts and drops the others,
    // recycles all their frames to the fill ring. Returns the number of
    // descriptors (frames) consumed. (The worker brackets the call with its
    // epoch section: the peek and every region write of the batch are inside.)
    template <typename Sink>
    uint32_t pollPrimary(uint32_t max, Sink&& sink) noexcept;

    // Pager, hot path: consumes up to `max` (<= kMaxBatch) backup
    // descriptors (whole packets, as pollPrimary) and calls
    // sink(const RxPacket&) for each valid packet. The pager then owns its
    // frames until it calls releaseBackup(packet.frames, packet.nframes) --
    // right after placing the payload, or after copying it out of the UMEM
    // when faults back up (heldBackup() near frameCount() starves the fill
    // ring). Invalid packets are counted and their frames recycled at once.
    // Returns descriptors (frames) consumed.
    template <typename Sink>
    uint32_t peekBackup(uint32_t max, Sink&& sink) noexcept;
    // Gives held backup frames back to the fill ring; any thread (e.g. a
    // thread that copied payloads out of the UMEM).
    void releaseBackup(const uint64_t* frames, uint32_t n) noexcept;
    void releaseBackup(uint64_t frame) noexcept { releaseBackup(&frame, 1); }
    uint64_t heldBackup() const noexcept { return held_.load(std::memory_order_relaxed); }

    // Blocks until the primary ring has frames or timeoutMs passes; 1, 0 or -errno.
    int waitPrimary(int timeoutMs) const noexcept { return waitFd(primary_.fd(), timeoutMs); }
    // Frames waiting in the primary ring; safe from any thread (e.g. the
    // pager checking an idle worker before ending a grace period).
    uint32_t primaryBacklog() const noexcept { return primary_.rxBacklog(); }
    // The RX producer indexes now, and whether both rings have released
    // every frame produced before them (any thread).
    struct RxMark {
        uint32_t primary = 0, backup = 0;
    };
    RxMark rxMark() const noexcept { return {primary_.rxProduced(), backup_.rxProduced()}; }
    bool releasedPast(const RxMark& m) const noexcept
    {
        return static_cast<int32_t>(primary_.rxConsumed() - m.primary) >= 0 &&
               static_cast<int32_t>(backup_.rxConsumed() - m.backup) >= 0;
    }
    int primaryFd() const noexcept { return primary_.fd(); }
    int backupFd() const noexcept { return backup_.fd(); }

    QueueStats stats() const;
    uint32_t queue() const noexcept { return cfg_.queue; }
    bool zeroCopy() const noexcept { return primary_.zeroCopy(); }
    bool multiBuffer() const noexcept { return primary_.multiBuffer(); }
    const Umem& umem() const noexcept { return umem_; }
    Umem& umem() noexcept { return umem_; }
    const QueueConfig& config() const noexcept { return cfg_; }

private:
    QueueSockets(const QueueConfig& cfg, const FlowSet& flows, int xskmapFd, Fd ownerFd);
    static const QueueConfig& checked(const QueueConfig& cfg);
    static int waitFd(int fd, int timeoutMs) noexcept;
    static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) noexcept
    {
        c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    // Validates the packet of the n descriptors at rx index `at`; on Ok fills
    // *pkt. frames[0 .. *nf) get the frames to recycle (descriptors outside
    // the UMEM have none).
    MetaStatus inspect(const RxRing& rx, uint32_t at, uint32_t n, RingKind ring, RxPacket* pkt, uint64_t* frames,
                       uint32_t* nf) const noexcept;
    // Descriptors of the packet at rx index `at` among the `avail` peeked
    // there (1 .. avail), or 0 if it goes on beyond them.
    static uint32_t packetDescs(const RxRing& rx, uint32_t at, uint32_t avail) noexcept;
    // Splits n (<= kMaxBatch) peeked descriptors at `first` into packets:
    // calls each(at, count) for whole packets while they fit `max`
    // descriptors (the first one always), drops the descriptors of a packet
    // longer than kMaxBatch (and, through *skipping, the rest of it in later
    // calls). Returns the descriptors to release.
    template <typename Each>
    uint32_t forEachPacket(const RxRing& rx, uint32_t first, uint32_t n, uint32_t max, bool* skipping,
                           RingCounters& cnt, uint64_t* frames, uint32_t* nf, Each&& each) const noexcept;
    void recycle(const uint64_t* frames, uint32_t n) noexcept;
    // The end of a poll that used `used` descriptors of rx (0: nothing
    // happened): gives them back to the kernel, recycles frames[0 .. n) and
    // counts `ok` packets of `bytes` payload bytes in cnt.
    void finishPoll(RxRing& rx, uint32_t used, const uint64_t* frames, uint32_t n, RingCounters& cnt, uint64_t ok,
                    uint64_t bytes) noexcept
    {
        if (!used)
            return;
        rx.release(used);
        recycle(frames, n);
        bump(cnt.packets, ok);
        bump(cnt.bytes, bytes);
    }

    QueueConfig cfg_;
    const FlowSet& flows_;
    // Teardown order = reverse: backup, primary, then the UMEM.
    Umem umem_;
    XskSocket primary_;
    XskSocket backup_;
    RingCounters primaryCnt_; // worker
    RingCounters backupCnt_;  // pager
    bool primarySkip_ = false; // worker: dropping the rest of an overlong packet
    bool backupSkip_ = false;  // pager: same
    std::atomic<uint64_t> held_{0};  // pager and releasers
    std::atomic<uint64_t> kicks_{0}; // worker and pager
};

inline MetaStatus QueueSockets::inspect(const RxRing& rx, uint32_t at, uint32_t n, RingKind ring, RxPacket* pkt,
                                        uint64_t* frames, uint32_t* nf) const noexcept
{
    const uint32_t frameSize = umem_.frameSize();
    bool bad = n > kMaxFrags;
    uint32_t fragLen = 0;
    *nf = 0;
    for (uint32_t i = 0; i < n; i++) {
        const xdp_desc& d = rx.at(at + i);
        const uint64_t f = umem_.frameOf(d.addr);
        if (f >= umem_.bytes()) {
            bad = true;
            continue;
        }
        frames[(*nf)++] = f;
        // The first descriptor is checked by validateMeta, the others here:
        // every byte inside its own frame.
        if (i > 0 && !bad) {
            if (d.len > frameSize - (d.addr - f))
                bad = true;
            else
                fragLen += d.len;
        }
    }
    if (bad)
        return MetaStatus::BadDescriptor;
    // The first descriptor holds npf_meta, then the packet.
    constexpr uint32_t kMeta = sizeof(npf_meta);
    const xdp_desc& d0 = rx.at(at);
    if (d0.len < kMeta)
        return MetaStatus::BadDescriptor;
    const uint8_t* base = umem_.base() + frames[0];
    const FrameView v{{base, frameSize}, uint32_t(d0.addr - frames[0]) + kMeta, d0.len - kMeta, fragLen};
    MetaStatus st = validateMeta(v, cfg_.regionBytes, flows_, ring, &pkt->meta);
    if (st != MetaStatus::Ok)
        return st;
    const npf_meta& m = pkt->meta;
    pkt->payload = base + v.pktOff + m.payload_off;
    pkt->tail = (m.flags & NPF_META_F_TRUNCATED) ? truncatedTail(v, m) : 0;
    pkt->frame = frames[0];
    pkt->queue = cfg_.queue;
    pkt->nframes = n;
    std::copy(frames, frames + n, pkt->frames.begin());
    // The payload: from payload_off in the first frame, through the fragments
    // (validateMeta and truncatedTail bound meta.len + tail by the packet).
    uint32_t want = m.len + pkt->tail;
    pkt->pieces = 0;
    if (n == 1) {
        pkt->piece[0] = {pkt->payload, want};
        pkt->pieces = 1;
        return MetaStatus::Ok;
    }
    uint32_t skip = kMeta + m.payload_off;
    for (uint32_t i = 0; i < n && want; i++) {
        const xdp_desc& d = rx.at(at + i);
        const uint8_t* data = umem_.base() + d.addr;
        uint32_t len = d.len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        data += skip;
        len -= skip;
        skip = 0;
        const uint32_t take = std::min(len, want);
        pkt->piece[pkt->pieces++] = {data, take};
        want -= take;
    }
    return MetaStatus::Ok;
}

inline uint32_t QueueSockets::packetDescs(const RxRing& rx, uint32_t at, uint32_t avail) noexcept
{
    for (uint32_t i = 0; i < avail; i++)
        if (!(rx.at(at + i).options & XDP_PKT_CONTD))
            return i + 1;
    return 0;
}

template <typename Each>
uint32_t QueueSockets::forEachPacket(const RxRing& rx, uint32_t first, uint32_t n, uint32_t max, bool* skipping,
                                     RingCounters& cnt, uint64_t* frames, uint32_t* nf, Each&& each) const noexcept
{
    uint32_t used = 0;
    auto dropDescs = [&](uint32_t k) {
        for (uint32_t i = 0; i < k; i++) {
            const uint64_t f = umem_.frameOf(rx.at(first + used + i).addr);
            if (f < umem_.bytes())
                frames[(*nf)++] = f;
        }
        used += k;
    };
    if (*skipping) {
        const uint32_t k = packetDescs(rx, first, n);
        *skipping = k == 0;
        dropDescs(k ? k : n);
    }
    while (used < n) {
        uint32_t k = packetDescs(rx, first + used, n - used);
        if (k == 0) {
            // The kernel publishes whole packets: the rest of this one is
            // beyond the peeked descriptors. The next call gets it unless it
            // alone is longer than kMaxBatch (a 64 KiB frame in 2 KiB frames
            // takes 37): drop that.
            if (used > 0 || n < kMaxBatch)
                break;
            bump(cnt.badMeta[size_t(MetaStatus::BadDescriptor)]);
            *skipping = true;
            dropDescs(n);
            break;
        }
        if (used > 0 && used + k > max)
            break;
        each(first + used, k);
        used += k;
    }
    return used;
}

template <typename Sink>
uint32_t QueueSockets::pollPrimary(uint32_t max, Sink&& sink) noexcept
{
    static_assert(std::is_nothrow_invocable_v<Sink&, const RxPacket&> ||
                      std::is_nothrow_invocable_v<Sink&, std::span<const RxPacket>>,
                  "the sink must be noexcept");
    uint64_t frames[kMaxBatch];
    uint32_t first, nf = 0;
    RxRing& rx = primary_.rx();
    max = std::min(max, kMaxBatch);
    const uint32_t n = rx.peek(kMaxBatch, &first);
    uint64_t ok = 0, bytes = 0;
    constexpr bool kBatchSink = std::is_invocable_v<Sink&, std::span<const RxPacket>>;
    RxPacket pkts[kBatchSink ? kMaxBatch : 1];
    const uint32_t used =
        forEachPacket(rx, first, n, max, &primarySkip_, primaryCnt_, frames, &nf, [&](uint32_t at, uint32_t k) {
            RxPacket& pkt = pkts[kBatchSink ? ok : 0];
            uint32_t got;
            MetaStatus st = inspect(rx, at, k, RingKind::Primary, &pkt, frames + nf, &got);
            nf += got;
            if (st == MetaStatus::Ok) {
                if constexpr (!kBatchSink)
                    sink(pkt);
                ok++;
                bytes += pkt.meta.len;
            } else {
                bump(primaryCnt_.badMeta[size_t(st)]);
            }
        });
    if constexpr (kBatchSink) {
        if (ok)
            sink(std::span<const RxPacket>(pkts, ok));
    }
    finishPoll(rx, used, frames, nf, primaryCnt_, ok, bytes);
    return used;
}

template <typename Sink>
uint32_t QueueSockets::peekBackup(uint32_t max, Sink&& sink) noexcept
{
    static_assert(std::is_nothrow_invocable_v<Sink&, const RxPacket&>, "the sink must be noexcept");
    uint64_t bad[kMaxBatch];
    uint32_t first, nbad = 0;
    RxRing& rx = backup_.rx();
    max = std::min(max, kMaxBatch);
    const uint32_t n = rx.peek(kMaxBatch, &first);
    uint64_t ok = 0, bytes = 0;
    const uint32_t used =
        forEachPacket(rx, first, n, max, &backupSkip_, backupCnt_, bad, &nbad, [&](uint32_t at, uint32_t k) {
            RxPacket pkt;
            uint32_t got;
            MetaStatus st = inspect(rx, at, k, RingKind::Backup, &pkt, bad + nbad, &got);
            if (st == MetaStatus::Ok) {
                // Counted as held before the sink runs: the sink may release at once.
                held_.fetch_add(pkt.nframes, std::memory_order_relaxed);
                sink(pkt);
                ok++;
                bytes += pkt.meta.len;
            } else {
                bump(backupCnt_.badMeta[size_t(st)]);
                nbad += got;
            }
        });
    // The descriptors are copied out; the frames themselves stay ours until
    // released, so the RX slots can go back to the kernel now.
    finishPoll(rx, used, bad, nbad, backupCnt_, ok, bytes);
    return used;
}

} // namespace npf::xsk
