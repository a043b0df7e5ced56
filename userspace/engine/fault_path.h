// A pager's fault path: datagrams whose destination page is not resident,
// from its queues' backup rings and from its workers' deferred queue, placed
// in batches -- installed with their pages (npf), or dropped while the page
// is brought in (FaultPolicy::Drop, the baseline of a NIC without NPF).
// Counts into its own tally and histograms; everything else is the pager
// thread's.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/deferred.h"
#include "engine/pager_context.h"
#include "engine/region_share.h"
#include "engine/served_flow.h"
#include "npf/counters.h"
#include "region/region.h"
#include "sys/latency_histogram.h"
#include "xsk/queue.h"

namespace npf {

class FaultPath {
public:
    FaultPath(const PagerContext& ctx, const RegionShare& share);

    // One batch of the backup ring; returns the packets taken.
    uint32_t drainBackup(xsk::QueueSockets& q) noexcept;
    // A round keeps taking full batches from the backup rings for this long
    // before it publishes, prefetches and serves CPU faults (at most
    // kMaxBatchesPerRound per ring): under a fault burst, the round's fixed
    // costs (a poll, a publish that wakes the application, two context
    // switches when they share a CPU) are paid once per several batches.
    static constexpr uint64_t kBusyRoundNs = 1'000'000;
    static constexpr uint32_t kMaxBatchesPerRound = 32;
    void drainDeferred() noexcept;
    // The workers of the pager's queues hand it primary datagrams whose page
    // was evicted meanwhile.
    DeferredQueue& deferred() noexcept { return deferred_; }

    // Each placed datagram XDP stamped, once per stage of kFaultStages
    // (npf/counters.h), in its order: the stages of a datagram add up to
    // the last, its total (steered -> its completion seen published).
    // Written by the pager only.
    using Latencies = std::array<LatencyHistogram, kFaultStages.size()>;
    const Latencies& latencies() const noexcept { return lat_; }
    const EngineTally& counters() const noexcept { return counters_; }
    // Pager::publish, after publishing every flow from `publishNs` on: the
    // stages of the datagrams completed this round (one held back in seq
    // order behind another datagram counts as published then: the last look
    // before the flows may close).
    void notePublished(uint64_t publishNs) noexcept;

private:
    using PlaceFn = void (FaultPath::*)(uint64_t pickupNs) noexcept;
    void install(uint64_t pickupNs) noexcept;
    void dropAndFetch(uint64_t pickupNs) noexcept;
    // Sorts the batch by region (stable: a datagram's patches stay together
    // and in order), so each region gets one applyPatches call.
    void groupByRegion() noexcept;
    // Places and completes the datagrams of patches [b, e), one region's.
    void placeRun(size_t b, size_t e) noexcept;
    void completeRun(size_t b, size_t e) noexcept;
    // How many datagrams a batch held (fault_batches_* counters).
    void countBatch(size_t datagrams) noexcept;

    const PagerContext& ctx_;
    const RegionShare& share_;
    const PlaceFn place_; // chosen once, from EngineConfig::faultPolicy
    DeferredQueue deferred_;
    EngineTally counters_;
    Latencies lat_;

    // One batch of payloads to place: patches_[i] belongs to placements_[i].
    struct Placement {
        ServedFlow* flow; // nullptr: continues the datagram before it (a payload in several frames)
        uint64_t seq;
        uint16_t status;
        uint64_t tstamp; // steered, CLOCK_MONOTONIC ns; 0: not stamped
        Region* region;  // the flow's (set on continuations too)
        uint64_t imageNs = 0, copyNs = 0; // of the applyPatches call that placed it
    };
    // A completed datagram whose completion the pager has not seen published yet.
    struct Timeline {
        ServedFlow* flow;
        uint64_t seq, steered, pickup, image, copy, complete;
    };
    void record(const Timeline& t, uint64_t published) noexcept;
    std::vector<Patch> patches_, patchesTmp_;
    std::vector<Placement> placements_, placementsTmp_;
    std::vector<int> results_;
    std::vector<uint64_t> frames_;
    std::vector<Timeline> unpublished_;
    uint64_t pickupNs_ = 0; // of the batch being placed
};

} // namespace npf
