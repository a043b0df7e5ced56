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

namespace npf::xsk {

// A frame whose meta passed validateMeta.
struct RxPacket {
    npf_meta meta;          // validated copy
    const uint8_t* payload; // meta.len bytes inside the UMEM frame
    uint32_t tail;          // TRUNCATED: datagram bytes after those meta.len (for its checksum)
    uint64_t frame;         // UMEM address of the frame (what releaseBackup takes)
    uint32_t queue;
};

// Epoch publication for the region's eviction grace period. XDP, not the
// worker, checks the resident bits, so a frame steered to the primary ring
// under an old bit may still sit in the ring after the worker's last batch.
// A worker therefore may only claim epoch e once it has processed every
// frame published before it read e: begin() runs before the ring is peeked
// and returns the current epoch; end(token, drained) runs after every
// region write of the batch is done, also for empty batches. drained is
// true when the peek emptied the ring; only then may the token be
// published. (The pager must additionally wait for in-flight XDP runs to
// finish between clearing bits and advancing the epoch.)
struct EpochHook {
    uint64_t (*begin)(void* ctx) noexcept = nullptr;
    void (*end)(void* ctx, uint64_t token, bool drained) noexcept = nullptr;
    void* ctx = nullptr;
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

class QueueSockets {
public:
    // Creates the UMEM and both sockets, binds them to (cfg.ifindex,
    // cfg.queue) and, if xskmapFd >= 0, inserts them into the XSKMAP
    // (primary first: XDP uses a queue only once both slots are filled).
    // `flows` must outlive this object. Must run in the interface's netns.
    QueueSockets(const QueueConfig& cfg, const FlowSet& flows, int xskmapFd);
    QueueSockets(const QueueSockets&) = delete;
    QueueSockets& operator=(const QueueSockets&) = delete;

    // Worker, hot path: consumes up to `max` (<= kMaxBatch) primary frames,
    // calls sink(const RxPacket&) for each valid one -- or, if the sink takes
    // std::span<const RxPacket>, once with all of them (the payload pointers
    // are valid only during the call) -- counts and drops the others,
    // recycles all of them to the fill ring, brackets the batch with the
    // epoch hook.
    // Returns the number of frames consumed.
    template <typename Sink>
    uint32_t pollPrimary(uint32_t max, Sink&& sink, EpochHook epoch = {}) noexcept;

    // Pager, hot path: consumes up to `max` (<= kMaxBatch) backup frames and
    // calls sink(const RxPacket&) for each valid one. The pager then owns
    // those frames until it calls releaseBackup(packet.frame) -- right after
    // placing the payload, or after copying it out of the UMEM when faults
    // back up (heldBackup() near frameCount() starves the fill ring).
    // Invalid frames are counted and recycled at once. Returns frames consumed.
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
    uint32_t backupBacklog() const noexcept { return backup_.rxBacklog(); }
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
    // Validates the frame of `d`; on Ok fills *pkt. *frame gets the frame
    // address to recycle, or ~0 if the descriptor is not inside the UMEM.
    MetaStatus inspect(const xdp_desc& d, RingKind ring, RxPacket* pkt, uint64_t* frame) const noexcept;
    void recycle(const uint64_t* frames, uint32_t n) noexcept;

    QueueConfig cfg_;
    const FlowSet& flows_;
    // Teardown order = reverse: backup, primary, then the UMEM.
    Umem umem_;
    XskSocket primary_;
    XskSocket backup_;
    RingCounters primaryCnt_; // worker
    RingCounters backupCnt_;  // pager
    std::atomic<uint64_t> held_{0};  // pager and releasers
    std::atomic<uint64_t> kicks_{0}; // worker and pager
};

inline MetaStatus QueueSockets::inspect(const xdp_desc& d, RingKind ring, RxPacket* pkt,
                                        uint64_t* frame) const noexcept
{
    const uint64_t f = umem_.frameOf(d.addr);
    if (f >= umem_.bytes()) {
        *frame = ~0ull;
        return MetaStatus::BadDescriptor;
    }
    *frame = f;
    const uint8_t* base = umem_.base() + f;
    FrameView v{{base, umem_.frameSize()}, uint32_t(d.addr - f), d.len};
    MetaStatus st = validateMeta(v, cfg_.regionBytes, flows_, ring, &pkt->meta);
    if (st == MetaStatus::Ok) {
        pkt->payload = base + v.pktOff + pkt->meta.payload_off;
        pkt->tail = (pkt->meta.flags & NPF_META_F_TRUNCATED) ? truncatedTail(v, pkt->meta) : 0;
        pkt->frame = f;
        pkt->queue = cfg_.queue;
    }
    return st;
}

template <typename Sink>
uint32_t QueueSockets::pollPrimary(uint32_t max, Sink&& sink, EpochHook epoch) noexcept
{
    static_assert(std::is_nothrow_invocable_v<Sink&, const RxPacket&> ||
                      std::is_nothrow_invocable_v<Sink&, std::span<const RxPacket>>,
                  "the sink must be noexcept");
    uint64_t frames[kMaxBatch];
    uint32_t first, nf = 0;
    RxRing& rx = primary_.rx();
    const uint64_t token = epoch.begin ? epoch.begin(epoch.ctx) : 0;
    max = std::min(max, kMaxBatch);
    const uint32_t n = rx.peek(max, &first);
    uint64_t ok = 0, bytes = 0;
    constexpr bool kBatchSink = std::is_invocable_v<Sink&, std::span<const RxPacket>>;
    RxPacket pkts[kBatchSink ? kMaxBatch : 1];
    for (uint32_t i = 0; i < n; i++) {
        RxPacket& pkt = pkts[kBatchSink ? ok : 0];
        uint64_t f;
        MetaStatus st = inspect(rx.at(first + i), RingKind::Primary, &pkt, &f);
        if (st == MetaStatus::Ok) {
            if constexpr (!kBatchSink)
                sink(pkt);
            ok++;
            bytes += pkt.meta.len;
        } else {
            bump(primaryCnt_.badMeta[size_t(st)]);
        }
        if (f != ~0ull)
            frames[nf++] = f;
    }
    if constexpr (kBatchSink) {
        if (ok)
            sink(std::span<const RxPacket>(pkts, ok));
    }
    if (n) {
        rx.release(n);
        recycle(frames, nf);
        bump(primaryCnt_.packets, ok);
        bump(primaryCnt_.bytes, bytes);
    }
    if (epoch.end)
        epoch.end(epoch.ctx, token, n < max);
    return n;
}

template <typename Sink>
uint32_t QueueSockets::peekBackup(uint32_t max, Sink&& sink) noexcept
{
    static_assert(std::is_nothrow_invocable_v<Sink&, const RxPacket&>, "the sink must be noexcept");
    uint64_t bad[kMaxBatch];
    uint32_t first, nbad = 0;
    RxRing& rx = backup_.rx();
    const uint32_t n = rx.peek(std::min(max, kMaxBatch), &first);
    uint64_t ok = 0, bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        RxPacket pkt;
        uint64_t f;
        MetaStatus st = inspect(rx.at(first + i), RingKind::Backup, &pkt, &f);
        if (st == MetaStatus::Ok) {
            // Counted as held before the sink runs: the sink may release at once.
            held_.fetch_add(1, std::memory_order_relaxed);
            sink(pkt);
            ok++;
            bytes += pkt.meta.len;
        } else {
            bump(backupCnt_.badMeta[size_t(st)]);
            if (f != ~0ull)
                bad[nbad++] = f;
        }
    }
    if (n) {
        // The descriptors are copied out; the frames themselves stay ours
        // until released, so the RX slots can go back to the kernel now.
        rx.release(n);
        recycle(bad, nbad);
        bump(backupCnt_.packets, ok);
        bump(backupCnt_.bytes, bytes);
    }
    return n;
}

} // namespace npf::xsk
