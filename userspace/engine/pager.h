// The pager thread: the fault path (backup rings, deferred payloads), CPU
// faults from the userfaultfd, prefetch ahead of faulting flows, settling
// claims (LOST on proof of a drop), the periodic tick (stats snapshot,
// interface check). Every member is the pager thread's unless marked.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "engine/deferred.h"
#include "engine/flow_table.h"
#include "engine/grace_period.h"
#include "npf/engine.h"
#include "region/region.h"
#include "sys/fd.h"
#include "sys/latency_histogram.h"
#include "xsk/queue.h"

namespace npf {

class Pager {
public:
    struct Hooks {
        std::function<void()> tick; // every 500 ms on the pager thread (the stats snapshot)
        std::function<void()> gone; // the interface vanished: the engine stops serving
    };
    Pager(const EngineConfig& cfg, Region& region, FlowTable& flows,
          const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues, uint32_t maxDatagram, Hooks hooks);
    ~Pager(); // stops and joins the thread
    Pager(const Pager&) = delete;
    Pager& operator=(const Pager&) = delete;

    void start();
    void stop() noexcept;
    // Any thread: the pager looks at its inputs now.
    void wake() noexcept;
    // Workers hand it primary datagrams whose page was evicted meanwhile.
    DeferredQueue& deferred() noexcept { return deferred_; }

    // Counters and histograms (any thread; relaxed).
    struct Counters {
        std::atomic<uint64_t> faultPath{0}, placeErrors{0}, faultDrops{0}, csumErrors{0};
        ClaimCounters claims;
    };
    const Counters& counters() const noexcept { return counters_; }
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
    void prefetchAhead() noexcept;
    void settleClaims() noexcept;
    bool socketGone(int fd) noexcept;
    int timeoutMs(uint64_t nowNs) const noexcept;

    const EngineConfig& cfg_;
    Region& region_;
    FlowTable& flows_;
    const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues_;
    const Hooks hooks_;
    const PlaceFn place_;
    Fd wakeFd_; // eventfd: any thread -> pager
    DeferredQueue deferred_;
    Counters counters_;
    std::atomic<bool> stop_{false};

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
        uint64_t tstamp;
    };
    std::vector<Patch> patches_;
    std::vector<Placement> placements_;
    std::vector<int> results_;
    std::vector<uint64_t> frames_;

    std::unique_ptr<GracePeriods> grace_; // its thread wakes ours
    std::thread thread_;
};

} // namespace npf
