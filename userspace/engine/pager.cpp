#include "engine/pager.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sys/clock.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/thread.h"

namespace npf {

PagerWakers::PagerWakers(uint32_t pagers)
{
    for (uint32_t k = 0; k < pagers; k++) {
        fds_.emplace_back(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!fds_.back())
            throwErrno("eventfd for the npf pager");
    }
}

void PagerWakers::wake(uint32_t pager) const noexcept
{
    const uint64_t one = 1;
    (void)!::write(fds_[pager].get(), &one, sizeof(one));
}

void PagerWakers::drain(uint32_t pager) const noexcept
{
    uint64_t v;
    (void)!::read(fds_[pager].get(), &v, sizeof(v));
}

Pager::Pager(const PagerContext& ctx, PagerShard shard)
    : ctx_(ctx), shard_(shard), share_(ctx, shard), faultPath_(ctx, share_), prefetcher_(ctx, share_),
      housekeeper_(ctx)
{
    for (const auto& q : ctx.queues)
        if (shard_.ownsQueue(q->queue()))
            ownQueues_.push_back(q.get());
}

Pager::~Pager() { stop(); }

void Pager::start()
{
    if (shard_.lead()) {
        grace_ = std::make_unique<GracePeriods>([this] { wake(); });
        settleSource_ = std::make_unique<FlowSettleSource>(ctx_.flows, ctx_.queues, *grace_);
    }
    running_.store(true, std::memory_order_release);
    thread_ = std::thread([this] { loop(); });
}

void Pager::stop() noexcept
{
    stop_.store(true, std::memory_order_release);
    wake();
    if (thread_.joinable())
        thread_.join();
    settleSource_.reset();
    grace_.reset();
}

void Pager::loop() noexcept
{
    const std::string name = shard_.index ? "npf-pager" + std::to_string(shard_.index) : "npf-pager";
    pthread_setname_np(pthread_self(), name.c_str());
    const std::vector<int>& cpus = ctx_.cfg.pagerCpus;
    pinThread(shard_.index < cpus.size() ? cpus[shard_.index] : -1, "npf pager");
    (void)shortSlice(kSliceNs);
    std::vector<pollfd> fds;
    bool busy = false;
    bool prefetching = false; // a flow has more to prefetch: come back at once
    bool syncPending = false; // a sync() came during the last round: run the next one at once
    while (!stop_.load(std::memory_order_acquire)) {
        rounds_.bump();
        const uint64_t asked = syncsAsked();
        waitForWork(fds, busy || prefetching || syncPending);
        share_.serveFaults(); // first: a thread is blocked on each of them
        share_.protectClients();
        busy = drainBackupRings();
        faultPath_.drainDeferred();
        if (shard_.lead())
            settler_.step(*settleSource_);
        const uint64_t now = monotonicNs();
        publish(now); // what this round placed, before prefetch takes its slice
        if (shard_.lead() && !housekeeper_.round(now)) {
            stopSyncs(); // the interface is gone
            return;
        }
        prefetching = prefetcher_.run(busy);
        syncPending = roundDone(asked);
    }
    if (shard_.lead())
        housekeeper_.lastTick();
    stopSyncs();
}

// While backup traffic keeps coming (`now`), poll only to pick up the other
// fds: one batch per queue per round, then publish and prefetch, so
// completions flow and prefetch gets ahead during a long fault burst.
void Pager::waitForWork(std::vector<pollfd>& fds, bool now) noexcept
{
    try {
        if (share_.refresh() || fds.empty()) {
            fds.clear();
            fds.push_back({ctx_.wakers.fd(shard_.index), POLLIN, 0});
            for (xsk::QueueSockets* q : ownQueues_)
                fds.push_back({q->backupFd(), POLLIN, 0});
            share_.addPollFds(fds);
        }
    } catch (const std::exception& e) {
        NPF_WARN_RL("npf pager: taking the region set: %s", e.what());
    }
    const int timeout = now || ctx_.cfg.pagerBusyPoll ? 0
                        : shard_.lead()               ? housekeeper_.timeoutMs(monotonicNs())
                                                      : Housekeeper::kMaxSleepMs;
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
        NPF_WARN_RL("npf pager: poll: %s", strerror(errno));
    if (!fds.empty() && (fds[0].revents & POLLIN))
        ctx_.wakers.drain(shard_.index);
}

bool Pager::drainBackupRings() noexcept
{
    bool busy = false;
    const uint64_t until = monotonicNs() + FaultPath::kBusyRoundNs;
    for (xsk::QueueSockets* q : ownQueues_) {
        uint32_t k = 0;
        while (faultPath_.drainBackup(*q) == xsk::kMaxBatch && ++k < FaultPath::kMaxBatchesPerRound &&
               monotonicNs() < until) {
        }
        busy |= k > 0;
    }
    return busy;
}

void Pager::publish(uint64_t now) noexcept
{
    ctx_.flows.forEach([&](ServedFlow& f) { f.publish(now); });
    faultPath_.notePublished(now);
}

void Pager::sync() noexcept
{
    const uint64_t want = askSync();
    std::unique_lock<std::mutex> lock(syncMu_);
    syncCv_.wait(lock, [&] { return syncDone_ >= want || !running_.load(std::memory_order_acquire); });
}

uint64_t Pager::askSync() noexcept
{
    uint64_t want;
    {
        std::lock_guard<std::mutex> lock(syncMu_);
        if (!running_.load(std::memory_order_acquire))
            return 0;
        want = ++syncWanted_;
    }
    wake();
    return want;
}

bool Pager::synced(uint64_t ticket) noexcept
{
    std::lock_guard<std::mutex> lock(syncMu_);
    return syncDone_ >= ticket || !running_.load(std::memory_order_acquire);
}

uint64_t Pager::syncsAsked() noexcept
{
    std::lock_guard<std::mutex> lock(syncMu_);
    return syncWanted_;
}

bool Pager::roundDone(uint64_t asked) noexcept
{
    std::lock_guard<std::mutex> lock(syncMu_);
    if (syncDone_ < asked) {
        syncDone_ = asked;
        syncCv_.notify_all();
    }
    return syncWanted_ > syncDone_;
}

void Pager::stopSyncs() noexcept
{
    std::lock_guard<std::mutex> lock(syncMu_);
    running_.store(false, std::memory_order_release);
    syncCv_.notify_all();
}

} // namespace npf
