// Internals of npf::Engine and npf::Flow: who owns what, which thread runs what.
//
//   app thread   Flow::post / poll / wait          (posts + cursor.prod, completion ring consumer)
//   worker[q]    primary ring of queue q            (fast path: memcpy into resident pages)
//   pager        backup rings, uffd, deferred work  (fault path, prefetch, eviction, LOST timeouts)
//
// Workers and the pager both publish completions; a flow's publish mutex
// keeps Sequencer::publish single-threaded.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ctl/dataplane.h"
#include "ctl/flows.h"
#include "engine/bpf_maps.h"
#include "npf/engine.h"
#include "order/completion_ring.h"
#include "order/sequencer.h"
#include "region/epoch.h"
#include "sys/latency_histogram.h"
#include "region/region.h"
#include "sys/fd.h"
#include "xsk/queue.h"

namespace npf {

constexpr uint64_t kPostMask = NPF_POST_RING_SIZE - 1;

struct Flow::Impl {
    Impl(Engine::Impl& e, ctl::FlowEntry entry, const ctl::FlowSpec& spec, bool ownsEntry, uint64_t startSeq);

    // Completes every ready seq in order into the ring (any thread).
    void publish(uint64_t nowNs) noexcept;

    Engine::Impl& eng;
    const uint32_t id;
    const uint32_t gen; // of the id when this flow took it: npf_meta.gen must match
    const ctl::FlowSpec spec;
    const bool ownsEntry; // the engine added the npf_flows entry (and removes it)
    npf_post* const posts;
    npf_cursor* const cursor;
    Sequencer seq;
    CompletionRing ring;
    std::mutex publishMu;
    std::atomic<bool> faulted{false}; // the pager should prefetch ahead of this flow
    // Seqs below `settled` were claimed by XDP, an RCU grace period has
    // passed since, and every RX ring has released what it held after it:
    // one of them still missing was dropped, so it may complete LOST (see
    // settleClaims). (Using cons itself would time out datagrams that are
    // merely in flight between XDP and a ring, or queued behind a busy CPU.)
    std::atomic<uint64_t> settled;
    uint64_t sampled; // pager: cons read before the grace period started

    // Application thread only.
    uint64_t prod;      // posts written
    uint64_t published; // posts visible to XDP (cursor->prod)
    bool served = false; // NPF_CURSOR_F_SERVED set
    uint64_t polled;
    std::unique_ptr<uint32_t[]> postedLen; // per slot: the length protect() covered
};

// A primary datagram whose page was evicted after XDP steered it: the
// worker copies it out and the pager places it.
struct Deferred {
    Flow::Impl* flow;
    uint64_t seq;
    uint64_t offset;
    uint16_t status;
    uint64_t tstamp;
    std::vector<uint8_t> bytes;
};

// Claims the packet's seq and checks it against the posted buffer. Returns
// the flow, or nullptr when the packet must be dropped (counted; a mismatch
// completes the seq LOST so the flow never stalls on it). Any thread.
Flow::Impl* claimPacket(Engine::Impl& e, const npf_meta& m, uint64_t* seq) noexcept;

inline uint16_t statusOf(const npf_meta& m) noexcept
{
    return (m.flags & NPF_META_F_TRUNCATED) ? NPF_CS_TRUNCATED : NPF_CS_OK;
}


struct Engine::Impl {
    explicit Impl(const EngineConfig& cfg);
    ~Impl();
    void setUp(); // everything after the program is attached or opened

    void startThreads();
    void stopThreads() noexcept;
    void workerLoop(xsk::QueueSockets& q, LatencyHistogram& fastLatency, int cpu) noexcept;
    void pagerLoop() noexcept;
    void wakePager() noexcept;

    // Pager pieces (pager.cpp).
    struct Placement {
        Flow::Impl* flow;
        uint64_t seq;
        uint16_t status;
        uint64_t tstamp;
    };
    // One batch of the queue's backup ring; returns frames taken.
    uint32_t drainBackup(xsk::QueueSockets& q) noexcept;
    void place(uint64_t pickupNs) noexcept;
    void drainDeferred() noexcept;
    void prefetchAhead() noexcept;
    void publishAll(uint64_t nowNs) noexcept;
    void settleClaims() noexcept;
    void barrierLoop() noexcept;
    bool socketGone(int fd) noexcept;
    void failServing() noexcept; // the interface vanished: stop, wake the application
    void detachOnExit() noexcept; // what the engine attached (teardown, in its namespace)
    int pagerTimeoutMs(uint64_t nowNs) const noexcept;
    void writeStatsFile() noexcept;
    EngineStats snapshot() const;
    std::string json() const;

    Flow::Impl* flow(uint32_t id) const noexcept { return flowById[id].load(std::memory_order_acquire); }

    EngineConfig cfg;
    Fd netns; // the network namespace the engine was created in (teardown runs there)
    bool attachedByUs = false;
    std::optional<ctl::Dataplane> dp;
    std::optional<MappedMaps> maps;
    EpochDomain epochs;
    std::unique_ptr<Region> region;
    xsk::FlowSet flowSet;
    std::vector<std::unique_ptr<xsk::QueueSockets>> queues;

    std::array<std::atomic<Flow::Impl*>, NPF_MAX_FLOWS> flowById{};
    std::mutex flowsMu; // openFlow
    std::vector<std::unique_ptr<Flow>> flows;

    Fd wakeFd; // eventfd: workers -> pager
    std::mutex deferMu;
    std::vector<Deferred> deferred;

    std::atomic<bool> stop{false};
    std::atomic<bool> ifaceGone{false}; // set once by failServing()
    std::vector<std::thread> workers;
    std::thread pager;

    // Proof that a claimed seq was dropped (settleClaims, pager thread): the
    // pager samples every flow's cons and asks the barrier thread for an RCU
    // grace period; once it is over, the pager marks every RX ring's
    // producer index and waits until the rings have released past the marks.
    enum class Settle { Idle, Barrier, Drain } settle = Settle::Idle;
    std::vector<xsk::QueueSockets::RxMark> settleMarks;
    std::mutex barrierMu;
    std::condition_variable barrierCv;
    uint64_t barrierRequested = 0;            // under barrierMu
    std::atomic<uint64_t> barrierDone{0};
    std::thread barrierThread;
    // Pager scratch: one batch of payloads to place.
    std::vector<Patch> patches;
    std::vector<Placement> placements;
    std::vector<int> results;
    std::vector<uint64_t> frames;
    std::string statsPath;

    // Counters (relaxed; single writer each unless noted).
    std::atomic<uint64_t> fastPath{0}, faultPath{0}, deferredCount{0}, rejected{0}, mismatch{0},
        placeErrors{0}, faultDrops{0}, csumErrors{0};
    // Written by the pager only.
    LatencyHistogram steerToPickup, pickupToImage, imageToCopy, faultTotal;
    // One per worker (index = queue), merged by snapshot().
    std::vector<std::unique_ptr<LatencyHistogram>> fastTotal;
};

} // namespace npf
