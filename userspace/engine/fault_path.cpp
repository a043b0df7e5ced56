#include "engine/fault_path.h"

#include <algorithm>
#include <iterator>
#include <cstring>

#include "sys/clock.h"
#include "sys/log.h"
#include "xsk/payload.h"

namespace npf {

// Deferred datagrams that may wait for the pager at a time: a post ring's
// worth, every datagram a flow can have outstanding. A burst into pages
// that vanished (a client punched its memfd; a 2 MiB page its own thread
// must install again, which may take the pager up to client_install_wait_us)
// defers a whole page's datagrams while the pager waits: 256 (the old
// capacity) lost the rest of a 1024-datagram burst into four punched pages.
constexpr uint32_t kDeferredCapacity = NPF_POST_RING_SIZE;

FaultPath::FaultPath(const PagerContext& ctx, const RegionShare& share)
    : ctx_(ctx),
      share_(share),
      place_(ctx.cfg.faultPolicy == FaultPolicy::Drop ? &FaultPath::dropAndFetch : &FaultPath::install),
      deferred_(kDeferredCapacity, ctx.maxDatagram)
{
    // The batch scratch never grows on the pager's (noexcept) path.
    const size_t most = std::max<size_t>(size_t(xsk::kMaxBatch) * xsk::kMaxFrags, kDeferredCapacity);
    patches_.reserve(most);
    placements_.reserve(most);
    patchesTmp_.reserve(most);
    placementsTmp_.reserve(most);
    results_.reserve(most);
    frames_.reserve(most);
    // A round's batches: one per backup ring, then the deferred ones.
    unpublished_.reserve(size_t(xsk::kMaxBatch) * kMaxBatchesPerRound * ctx.queues.size() + kDeferredCapacity);
}

uint32_t FaultPath::drainBackup(xsk::QueueSockets& q) noexcept
{
    patches_.clear();
    placements_.clear();
    frames_.clear();
    const uint64_t pickup = monotonicNs();
    uint32_t n = q.peekBackup(xsk::kMaxBatch, [&](const xsk::RxPacket& p) noexcept {
        frames_.insert(frames_.end(), p.frames.begin(), p.frames.begin() + p.nframes);
        uint64_t seq;
        ServedFlow* f = ctx_.flows.claim(p, &seq, counters_);
        if (!f)
            return;
        if (ctx_.cfg.verifyUdpChecksum && !xsk::csumHolds(p, xsk::sumPayload(p, 0, p.meta.len))) {
            counters_.add<&EngineStats::csumErrors>();
            f->seq.complete(seq, 0, NPF_CS_BAD_CSUM, NPF_CF_FAULT, pickup);
            return;
        }
        const uint64_t steered = xsk::steeredAtNs(p.meta, pickup); // 0: not stamped
        // One patch per frame the payload lies in (a jumbo datagram spans
        // several); the placements of the patches after the first have no
        // flow: they belong to the datagram before them (see install()).
        uint32_t at = 0, i = 0;
        do {
            const uint8_t* data = i < p.pieces ? p.piece[i].data : p.payload;
            const uint32_t len = i < p.pieces ? std::min(p.piece[i].len, p.meta.len - at) : 0;
            patches_.push_back({p.meta.offset + at, data, len});
            placements_.push_back(i == 0 ? Placement{f, seq, statusOf(p.meta), steered, &f->region}
                                         : Placement{nullptr, 0, 0, 0, &f->region});
            at += len;
        } while (++i < p.pieces && at < p.meta.len);
    });
    if (n == 0)
        return 0;
    countBatch(n);
    (this->*place_)(pickup);
    // The payloads are in the region now: the frames go back at once, so
    // the shared fill ring never starves while faults are being served.
    q.releaseBackup(frames_.data(), static_cast<uint32_t>(frames_.size()));
    return n;
}

void FaultPath::drainDeferred() noexcept
{
    const std::span<const Deferred> batch = deferred_.take();
    if (batch.empty())
        return;
    const uint64_t pickup = monotonicNs();
    countBatch(batch.size());
    patches_.clear();
    placements_.clear();
    for (const Deferred& d : batch) {
        patches_.push_back({d.offset, d.bytes, d.len});
        placements_.push_back({d.flow, d.seq, d.status, d.tstamp, &d.flow->region});
    }
    (this->*place_)(pickup);
}

// FaultPolicy::Drop: a NIC without network page faults. The datagram is
// gone; the OS brings the page in for the next one.
void FaultPath::dropAndFetch(uint64_t) noexcept
{
    const uint64_t now = monotonicNs();
    for (size_t i = 0; i < patches_.size(); i++) {
        (void)placements_[i].region->prefetch(patches_[i].offset, patches_[i].len);
        if (!placements_[i].flow)
            continue;
        placements_[i].flow->seq.complete(placements_[i].seq, 0, NPF_CS_LOST, NPF_CF_FAULT, now);
        counters_.add<&EngineStats::faultDrops>();
    }
}

// A datagram in several patches completes once, OK only if every one of its
// patches was placed.
void FaultPath::groupByRegion() noexcept
{
    const size_t n = patches_.size();
    bool mixed = false;
    for (size_t i = 1; i < n && !mixed; i++)
        mixed = placements_[i].region != placements_[0].region;
    if (!mixed)
        return;
    // Few regions per batch: one pass per distinct region, in first-seen order.
    patchesTmp_.clear();
    placementsTmp_.clear();
    for (size_t i = 0; i < n; i++) {
        Region* r = placements_[i].region;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = placements_[j].region == r;
        if (seen)
            continue;
        for (size_t j = i; j < n; j++)
            if (placements_[j].region == r) {
                patchesTmp_.push_back(patches_[j]);
                placementsTmp_.push_back(placements_[j]);
            }
    }
    patches_.swap(patchesTmp_);
    placements_.swap(placementsTmp_);
}

void FaultPath::install(uint64_t pickupNs) noexcept
{
    pickupNs_ = pickupNs;
    groupByRegion();
    results_.assign(patches_.size(), 0);
    for (size_t b = 0, e; b < patches_.size(); b = e) {
        Region* region = placements_[b].region;
        for (e = b + 1; e < patches_.size() && placements_[e].region == region; e++) {
        }
        placeRun(b, e);
    }
}

// Installs the pages of datagrams [b, e) and completes them.
void FaultPath::placeRun(size_t b, size_t e) noexcept
{
    BatchTiming t;
    const std::span<int> res = std::span(results_).subspan(b, e - b);
    int rc = placements_[b].region->applyPatches(std::span<const Patch>(patches_).subspan(b, e - b), res, &t);
    if (rc < 0)
        std::fill(res.begin(), res.end(), rc);
    // No page installed (all resident: patched in place): its time counts
    // as building the image.
    const uint64_t image = t.imageReady ? t.imageReady : std::max(t.end, pickupNs_);
    const uint64_t copy = std::max(t.copyDone, image);
    for (size_t k = b; k < e; k++) {
        placements_[k].imageNs = image;
        placements_[k].copyNs = copy;
    }
    completeRun(b, e);
}

void FaultPath::completeRun(size_t b, size_t e) noexcept
{
    const uint64_t now = monotonicNs();
    for (size_t i = b, end; i < e; i = end) {
        const Placement& p = placements_[i];
        int rc = results_[i];
        uint32_t len = patches_[i].len;
        for (end = i + 1; end < e && !placements_[end].flow; end++) {
            rc = rc ? rc : results_[end];
            len += patches_[end].len;
        }
        if (rc == 0) {
            p.flow->seq.complete(p.seq, len, p.status, NPF_CF_FAULT, now);
            if (p.tstamp) { // 0: a deferred datagram XDP did not stamp
                const Timeline t{p.flow, p.seq, p.tstamp, pickupNs_, p.imageNs, p.copyNs, now};
                if (unpublished_.size() < unpublished_.capacity())
                    unpublished_.push_back(t);
                else
                    record(t, now); // never: room for a round's batches
            }
            counters_.add<&EngineStats::faultPath>();
        } else {
            NPF_WARN_RL("npf pager: placing %u bytes at %llu: %s", len,
                        static_cast<unsigned long long>(patches_[i].offset), strerror(-rc));
            p.flow->seq.complete(p.seq, 0, NPF_CS_LOST, NPF_CF_FAULT, now);
            counters_.add<&EngineStats::placeErrors>();
        }
        if (!p.flow->faulted.exchange(true, std::memory_order_relaxed) && !share_.owns(p.region))
            share_.wakeOwner(p.region);
    }
}

void FaultPath::countBatch(size_t datagrams) noexcept
{
    if (datagrams < 2)
        counters_.add<&EngineStats::faultBatches1>();
    else if (datagrams < 4)
        counters_.add<&EngineStats::faultBatches2To3>();
    else if (datagrams < 8)
        counters_.add<&EngineStats::faultBatches4To7>();
    else if (datagrams < 16)
        counters_.add<&EngineStats::faultBatches8To15>();
    else if (datagrams < 32)
        counters_.add<&EngineStats::faultBatches16To31>();
    else
        counters_.add<&EngineStats::faultBatches32Up>();
}

void FaultPath::notePublished(uint64_t publishNs) noexcept
{
    for (const Timeline& t : unpublished_)
        record(t, publishNs);
    unpublished_.clear();
}

// Each stage from the end of the one before it, so that they add up to the
// total (a clock read out of order counts 0).
void FaultPath::record(const Timeline& t, uint64_t published) noexcept
{
    auto span = [](uint64_t from, uint64_t to) { return to > from ? to - from : 0; };
    // The stages' ends: steered, picked up, image ready, copied, completed, published.
    const uint64_t marks[] = {t.steered, t.pickup, t.image, t.copy, t.complete, published};
    static_assert(std::size(marks) == kFaultStages.size(), "a stage between each two marks, and the total");
    for (size_t i = 0; i + 1 < std::size(marks); i++)
        lat_[i].recordSingleWriter(span(marks[i], marks[i + 1]));
    lat_.back().recordSingleWriter(span(marks[0], published));
}

} // namespace npf
