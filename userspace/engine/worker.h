// One worker thread per RX queue: drains the queue's primary ring and copies
// payloads into resident pages (the fast path). Every member is the worker
// thread's; counters and the histogram are read by snapshots.
#pragma once

#include <atomic>
#include <optional>
#include <span>
#include <thread>

#include "engine/flow_table.h"
#include "engine/pager.h"
#include "npf/engine.h"
#include "region/epoch.h"
#include "region/region.h"
#include "sys/latency_histogram.h"
#include "sys/round_counter.h"
#include "xsk/queue.h"

namespace npf {

class Worker {
public:
    Worker(const EngineConfig& cfg, xsk::QueueSockets& queue, EpochDomain& epochs, FlowTable& flows, Pager& pager,
           int cpu);
    ~Worker(); // stops and joins the thread
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Starts the thread; with EngineConfig::runToCompletion there is none:
    // the application's threads run the batches through step().
    void start();
    // One batch of the primary ring on the calling thread (run to
    // completion); returns the datagrams taken. One thread at a time: a
    // thread that finds another inside returns 0 at once.
    uint32_t step() noexcept;
    // The primary ring's socket: readable when datagrams wait (to sleep on).
    int primaryFd() const noexcept { return queue_.primaryFd(); }
    // Asks the thread to stop (any thread, returns at once); stop() also joins it.
    void requestStop() noexcept { stop_.store(true, std::memory_order_release); }
    void stop() noexcept;

    // Any thread; relaxed.
    const EngineTally& counters() const noexcept { return counters_; }
    const LatencyHistogram& latency() const noexcept { return fastTotal_; }
    // Rounds of its loop (at least one per 10 ms while it runs): its liveness.
    uint64_t rounds() const noexcept { return rounds_.load(); }

private:
    // FaultPolicy::Block (every datagram to the primary ring, the worker
    // takes the page fault itself) is the loop without the residency check;
    // chosen at construction, not per packet.
    template <bool kBlock>
    void loop() noexcept;
    // One batch, in an epoch section of `reader`: the loop's body and step().
    template <bool kBlock>
    uint32_t runBatch(EpochDomain::Reader& reader) noexcept;
    template <bool kBlock>
    void placeBatch(std::span<const xsk::RxPacket> pkts) noexcept;
    static constexpr uint16_t kDeferred = 0xffff; // place(): handed to the pager
    static constexpr uint64_t kIdleSpinNs = 5'000; // loop(): how long an idle worker looks before it sleeps
    template <bool kBlock>
    uint16_t place(ServedFlow& f, uint64_t seq, const xsk::RxPacket& p) noexcept;
    bool copy(uint8_t* dst, const xsk::RxPacket& p) const noexcept;
    void complete(ServedFlow& f, uint64_t seq, uint16_t status, const npf_meta& m) noexcept;
    void finishBatch() noexcept;

    // The batch being placed (one pollPrimary call).
    struct Batch {
        ServedFlow* touched[xsk::kMaxBatch]; // its flows, each once: published after it
        size_t nTouched = 0;
        uint64_t placed = 0; // datagrams placed
        uint64_t now = 0;    // its time
        bool deferredAny = false;
        void touch(ServedFlow* f) noexcept;
        void reset() noexcept { nTouched = 0, placed = 0, now = 0, deferredAny = false; }
    };

    const EngineConfig& cfg_;
    xsk::QueueSockets& queue_;
    EpochDomain& epochs_;
    FlowTable& flows_;
    Pager& pager_;
    const int cpu_;
    EngineTally counters_;
    LatencyHistogram fastTotal_; // steered by XDP -> completed, ns
    Batch batch_;
    RoundCounter rounds_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::optional<EpochDomain::Reader> stepReader_; // run to completion: the callers' epoch slot
    std::atomic_flag stepping_ = ATOMIC_FLAG_INIT;   // a caller is inside step()
};

} // namespace npf
