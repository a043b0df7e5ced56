// A pager thread: the fault path (backup rings, deferred payloads), CPU
// faults from the userfaultfd, prefetch ahead of faulting flows, and on the
// lead pager settling claims (LOST on proof of a drop) and the periodic tick
// (stats snapshot, interface check). A service runs pagerThreads of them,
// each with its share (PagerShard). Every member is the pager thread's
// unless marked.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "engine/deferred.h"
#include "engine/flow_table.h"
#include "engine/grace_period.h"
#include "engine/region_set.h"
#include "npf/engine.h"
#include "region/region.h"
#include "sys/fd.h"
#include "sys/latency_histogram.h"
#include "xsk/queue.h"

namespace npf {

// Which share of a service's work a pager has. Queues go round robin (pager
// q % count serves queue q's backup ring and its worker's deferred
// datagrams); regions continue the round robin after the queues, so that
// with one queue and one region, two pagers split the backup ring from the
// region's faults and prefetch. Whoever drains a backup ring places its
// payloads into any region (Region is thread-safe); a region's CPU faults,
// prefetch and its clients' protection are its owner's alone.
struct PagerShard {
    uint32_t index = 0, count = 1;
    uint32_t queues = 1; // the service's
    bool lead() const noexcept { return index == 0; }
    bool ownsQueue(uint32_t q) const noexcept { return q % count == index; }
    uint32_t regionOwner(uint64_t serial) const noexcept { return static_cast<uint32_t>((queues + serial) % count); }
};

class Pager {
public:
    struct Hooks {
        std::function<void()> tick; // every 500 ms on the pager thread (the stats snapshot)
        std::function<void()> gone; // the interface vanished: the engine stops serving
    };
    // `pagers`: every pager of the service, this one at shard.index (read
    // once they all run, to wake a region's owner). Hooks run on the lead only.
    Pager(const EngineConfig& cfg, PagerShard shard, const std::vector<std::unique_ptr<Pager>>& pagers,
          const RegionSet& regions, FlowTable& flows, const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues,
          uint32_t maxDatagram, Hooks hooks);
    ~Pager(); // stops and joins the thread
    Pager(const Pager&) = delete;
    Pager& operator=(const Pager&) = delete;

    void start();
    void stop() noexcept;
    // Any thread: the pager looks at its inputs now.
    void wake() noexcept;
    // The workers of its queues hand it primary datagrams whose page was
    // evicted meanwhile.
    DeferredQueue& deferred() noexcept { return deferred_; }
    // Control thread: returns once the pager has run a whole round that began
    // after the call (it holds no flow or region it held before, and has
    // taken every deferred datagram pushed before). At once if not running.
    void sync() noexcept;

    // Counters and histograms (any thread; relaxed).
    const EngineTally& counters() const noexcept { return counters_; }
    LatencyHistogram steerToPickup, pickupToImage, imageToCopy, faultTotal; // written by the pager only

private:
    // How a batch of fault-path payloads is placed, chosen at construction
    // from EngineConfig::faultPolicy: installed with the page (npf), or
    // dropped while the page is brought in (the baseline of a NIC without NPF).
    using PlaceFn = void (Pager::*)(uint64_t pickupNs) noexcept;

    void loop() noexcept;
    uint32_t drainBackup(xsk::QueueSockets& q) noexcept; // one batch; returns frames taken
    void drainDeferred() noexcept;
    void install(uint64_t pickupNs) noexcept;
    void dropAndFetch(uint64_t pickupNs) noexcept;
    void prefetchAhead(bool busy) noexcept;
    void settleClaims() noexcept;
    void stopSyncs() noexcept; // the loop ended: sync() returns at once from now on
    bool socketGone(int fd) noexcept;
    int timeoutMs(uint64_t nowNs) const noexcept;
    void takeRegions();
    bool owns(const Region* r) const noexcept { return std::find(regions_.begin(), regions_.end(), r) != regions_.end(); }
    // Another pager owns the flow's region: wake it to prefetch ahead.
    void wakeOwner(const Region* r) noexcept;

    const EngineConfig& cfg_;
    const PagerShard shard_;
    const std::vector<std::unique_ptr<Pager>>& pagers_;
    const RegionSet& regionSet_;
    std::vector<RegionSet::Entry> allRegions_; // the pager's snapshot of regionSet_
    std::vector<Region*> regions_;             // those of them it owns
    uint64_t regionsGen_ = ~0ull;
    FlowTable& flows_;
    const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues_; // all (the lead settles over them)
    std::vector<xsk::QueueSockets*> ownQueues_;
    const Hooks hooks_;
    const PlaceFn place_;
    Fd wakeFd_; // eventfd: any thread -> pager
    DeferredQueue deferred_;
    EngineTally counters_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> running_{false};
    std::mutex syncMu_;
    std::condition_variable syncCv_;
    uint64_t syncWanted_ = 0, syncDone_ = 0; // under syncMu_

    // Proof that a claimed seq was dropped (settleClaims): sample every
    // flow's cons, wait for a grace period, mark every RX ring's producer
    // index, wait until the rings have released past the marks.
    enum class Settle { Idle, Barrier, Drain } settle_ = Settle::Idle;
    uint64_t graceTicket_ = 0;
    std::vector<xsk::QueueSockets::RxMark> settleMarks_;

    // One batch of payloads to place: patches_[i] belongs to placements_[i].
    struct Placement {
        ServedFlow* flow; // nullptr: continues the datagram before it (a payload in several frames)
        uint64_t seq;
        uint16_t status;
        uint64_t tstamp;   // steered, CLOCK_MONOTONIC ns; 0: not stamped
        Region* region;   // the flow's (set on continuations too)
    };
    // Sorts the batch by region (stable: a datagram's patches stay together
    // and in order), so each region gets one applyPatches call.
    void groupByRegion() noexcept;
    std::vector<Patch> patches_, patchesTmp_;
    std::vector<Placement> placements_, placementsTmp_;
    std::vector<int> results_;
    std::vector<uint64_t> frames_;

    std::unique_ptr<GracePeriods> grace_; // the lead's; its thread wakes ours
    std::thread thread_;
};

} // namespace npf
