// A pager thread. Its round is a short schedule of roles, each in a file of
// its own: CPU faults and clients' protection of the regions it owns
// (RegionShare), the fault path (FaultPath: backup rings, deferred
// datagrams), prefetch (Prefetcher), and on the lead pager the proof that a
// claimed seq was dropped (ClaimSettler) and the housekeeping (Housekeeper:
// tick, interface liveness). A service runs pagerThreads of them, each with
// its share (PagerShard), all over one PagerContext.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/claim_settler.h"
#include "engine/fault_path.h"
#include "engine/grace_period.h"
#include "engine/housekeeper.h"
#include "engine/pager_context.h"
#include "engine/prefetcher.h"
#include "engine/region_share.h"
#include "sys/round_counter.h"

namespace npf {

class Pager {
public:
    Pager(const PagerContext& ctx, PagerShard shard);
    ~Pager(); // stops and joins the thread
    Pager(const Pager&) = delete;
    Pager& operator=(const Pager&) = delete;
    // The pager's time slice (shortSlice): workers, the application and a
    // sender share the CPUs with it and datagrams wait for it; with the
    // default slice a woken pager waited up to 4 ms behind a worker
    // (perf sched, 2 vCPUs).
    static constexpr uint64_t kSliceNs = 100'000;

    void start();
    void stop() noexcept;
    // Any thread: the pager looks at its inputs now.
    void wake() noexcept { ctx_.wakers.wake(shard_.index); }
    DeferredQueue& deferred() noexcept { return faultPath_.deferred(); }
    // Control thread: returns once the pager has run a whole round that began
    // after the call (it holds no flow or region it held before, and has
    // taken every deferred datagram pushed before). At once if not running.
    void sync() noexcept;
    // The same without waiting: asks for that round and returns its ticket;
    // synced(ticket) is true once it has ended (or the pager stopped).
    uint64_t askSync() noexcept;
    bool synced(uint64_t ticket) noexcept;

    // Any thread; relaxed.
    const EngineTally& counters() const noexcept { return faultPath_.counters(); }
    const FaultPath::Latencies& latencies() const noexcept { return faultPath_.latencies(); }
    // Rounds of its loop (at least one per Housekeeper::kMaxSleepMs while it
    // runs): its liveness.
    uint64_t rounds() const noexcept { return rounds_.load(); }

private:
    void loop() noexcept;
    void waitForWork(std::vector<pollfd>& fds, bool now) noexcept;
    bool drainBackupRings() noexcept; // true if a ring had a full batch
    void publish(uint64_t now) noexcept;
    // sync(): the round that starts takes the syncs asked for so far; when it
    // ends they return. True if more came meanwhile (run the next round at once).
    uint64_t syncsAsked() noexcept;
    bool roundDone(uint64_t asked) noexcept;
    void stopSyncs() noexcept; // the loop ended: sync() returns at once from now on

    const PagerContext& ctx_;
    const PagerShard shard_;
    RegionShare share_;
    FaultPath faultPath_;
    Prefetcher prefetcher_;
    Housekeeper housekeeper_; // the lead's
    ClaimSettler settler_;    // the lead's
    std::vector<xsk::QueueSockets*> ownQueues_;
    std::unique_ptr<GracePeriods> grace_; // the lead's; its thread wakes ours
    std::unique_ptr<FlowSettleSource> settleSource_;

    RoundCounter rounds_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> running_{false};
    std::mutex syncMu_;
    std::condition_variable syncCv_;
    uint64_t syncWanted_ = 0, syncDone_ = 0; // under syncMu_
    std::thread thread_;
};

} // namespace npf
