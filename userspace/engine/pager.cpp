#include "engine/pager.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sys/clock.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/thread.h"
#include "xsk/payload.h"

namespace npf {

// Deferred datagrams that may wait for the pager at a time.
constexpr uint32_t kDeferredCapacity = 256;

Pager::Pager(const EngineConfig& cfg, PagerShard shard, const std::vector<std::unique_ptr<Pager>>& pagers,
             const RegionSet& regions, FlowTable& flows, const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues,
             uint32_t maxDatagram, Hooks hooks)
    : cfg_(cfg),
      shard_(shard),
      pagers_(pagers),
      regionSet_(regions),
      flows_(flows),
      queues_(queues),
      hooks_(std::move(hooks)),
      place_(cfg.faultPolicy == FaultPolicy::Drop ? &Pager::dropAndFetch : &Pager::install),
      wakeFd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      deferred_(kDeferredCapacity, maxDatagram)
{
    if (!wakeFd_)
        throwErrno("eventfd for the npf pager");
    // The batch scratch never grows on the pager's (noexcept) path.
    const size_t most = std::max<size_t>(size_t(xsk::kMaxBatch) * xsk::kMaxFrags, kDeferredCapacity);
    patches_.reserve(most);
    placements_.reserve(most);
    patchesTmp_.reserve(most);
    placementsTmp_.reserve(most);
    results_.reserve(most);
    frames_.reserve(most);
    settleMarks_.reserve(queues.size());
    for (const auto& q : queues)
        if (shard_.ownsQueue(q->queue()))
            ownQueues_.push_back(q.get());
}

Pager::~Pager() { stop(); }

void Pager::start()
{
    if (shard_.lead())
        grace_ = std::make_unique<GracePeriods>([this] { wake(); });
    running_.store(true, std::memory_order_release);
    thread_ = std::thread([this] { loop(); });
}

void Pager::sync() noexcept
{
    std::unique_lock<std::mutex> lock(syncMu_);
    if (!running_.load(std::memory_order_acquire))
        return;
    const uint64_t want = ++syncWanted_;
    lock.unlock();
    wake();
    lock.lock();
    syncCv_.wait(lock, [&] { return syncDone_ >= want || !running_.load(std::memory_order_acquire); });
}

void Pager::stop() noexcept
{
    stop_.store(true, std::memory_order_release);
    wake();
    if (thread_.joinable())
        thread_.join();
    grace_.reset();
}

void Pager::wake() noexcept
{
    const uint64_t one = 1;
    (void)!::write(wakeFd_.get(), &one, sizeof(one));
}

void Pager::takeRegions()
{
    regionsGen_ = regionSet_.snapshot(allRegions_);
    regions_.clear();
    for (const RegionSet::Entry& e : allRegions_)
        if (shard_.regionOwner(e.serial) == shard_.index)
            regions_.push_back(e.region);
}

void Pager::wakeOwner(const Region* r) noexcept
{
    for (const RegionSet::Entry& e : allRegions_)
        if (e.region == r) {
            if (const uint32_t k = shard_.regionOwner(e.serial); k != shard_.index)
                pagers_[k]->wake();
            return;
        }
}

void Pager::loop() noexcept
{
    const std::string name = shard_.index ? "npf-pager" + std::to_string(shard_.index) : "npf-pager";
    pthread_setname_np(pthread_self(), name.c_str());
    pinThread(shard_.index < cfg_.pagerCpus.size() ? cfg_.pagerCpus[shard_.index] : -1, "npf pager");
    std::vector<pollfd> fds;
    fds.reserve(2 + queues_.size() + 64);
    auto pollSet = [&] {
        fds.clear();
        fds.push_back({wakeFd_.get(), POLLIN, 0});
        for (xsk::QueueSockets* q : ownQueues_)
            fds.push_back({q->backupFd(), POLLIN, 0});
        for (Region* r : regions_) {
            fds.push_back({r->uffdFd(), POLLIN, 0});
            if (r->clientUffdFd() >= 0) // an npfd client's faults
                fds.push_back({r->clientUffdFd(), POLLIN, 0});
        }
    };

    uint64_t nextTick = 0;
    bool busy = false;
    bool syncPending = false; // a sync() came during the last round: run the next one at once
    while (!stop_.load(std::memory_order_acquire)) {
        uint64_t syncWanted;
        {
            std::lock_guard<std::mutex> lock(syncMu_);
            syncWanted = syncWanted_;
        }
        if (regionSet_.generation() != regionsGen_) {
            try {
                takeRegions();
                pollSet();
            } catch (const std::exception& e) {
                NPF_WARN_RL("npf pager: taking the region set: %s", e.what());
            }
        }
        // While backup traffic keeps coming, poll only to pick up the other
        // fds: one batch per queue per round, then publish and prefetch, so
        // completions flow and prefetch gets ahead during a long fault burst.
        int rc = ::poll(fds.data(), fds.size(), busy || syncPending || cfg_.pagerBusyPoll ? 0 : timeoutMs(monotonicNs()));
        if (rc < 0 && errno != EINTR)
            NPF_WARN_RL("npf pager: poll: %s", strerror(errno));
        if (fds[0].revents & POLLIN) {
            uint64_t v;
            (void)!::read(wakeFd_.get(), &v, sizeof(v));
        }
        // CPU faults first: a thread is blocked on each of them.
        for (Region* r : regions_) {
            if (int n = r->serviceFaults(); n < 0)
                NPF_WARN_RL("npf pager: serving CPU faults: %s", strerror(-n));
            if (r->clientUffdFd() >= 0 && !r->clientGone())
                (void)r->serviceClientFaults(); // a client gone is the owner's to clean up
        }
        // npfd clients' posted buffers: protected from eviction before
        // anything below installs (and evicts to the budget). By the
        // region's owner: a pager that drains a backup ring into another's
        // region relies on it (installs into a region take its lock).
        flows_.forEach([this](ServedFlow& f) {
            if (f.region.adopted() && owns(&f.region))
                f.syncProtection();
        });
        busy = false;
        for (xsk::QueueSockets* q : ownQueues_)
            busy |= drainBackup(*q) == xsk::kMaxBatch;
        drainDeferred();
        // Prefetch when there is slack: with the backup ring full, the
        // datagrams themselves bring 4 KiB pages in at the same cost per
        // page. Not 2 MiB ones: a page installed ahead spares the pager the
        // hundreds of datagrams that would otherwise take the backup ring
        // while it is missing, so those regions prefetch every round.
        prefetchAhead(busy);
        if (shard_.lead())
            settleClaims();
        const uint64_t now = monotonicNs();
        flows_.forEach([&](ServedFlow& f) { f.publish(now); });
        if (shard_.lead() && now >= nextTick) {
            hooks_.tick();
            nextTick = now + 500'000'000ull;
            // AF_XDP sockets report no POLLERR: ask them with the snapshot.
            for (auto& q : queues_)
                if (socketGone(q->backupFd())) {
                    NPF_ERR("%s is gone (deleted, or moved out of this network namespace): the engine stops "
                            "serving it",
                            cfg_.ifname.c_str());
                    hooks_.gone();
                    // Every application thread blocked in Flow::wait wakes:
                    // Engine::failure() says why.
                    flows_.forEach([](ServedFlow& f) { f.wakeApplication(); });
                    stopSyncs();
                    return;
                }
        }
        std::lock_guard<std::mutex> lock(syncMu_);
        if (syncDone_ < syncWanted) {
            syncDone_ = syncWanted;
            syncCv_.notify_all();
        }
        syncPending = syncWanted_ > syncDone_;
    }
    if (shard_.lead())
        hooks_.tick();
    stopSyncs();
}

void Pager::stopSyncs() noexcept
{
    std::lock_guard<std::mutex> lock(syncMu_);
    running_.store(false, std::memory_order_release);
    syncCv_.notify_all();
}

// The kernel unbinds every AF_XDP socket of an interface that is deleted or
// leaves the namespace (NETDEV_UNREGISTER) and sets ENETDOWN as its error.
bool Pager::socketGone(int fd) noexcept
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err == 0)
        return false;
    if (err != ENETDOWN) {
        NPF_WARN_RL("npf pager: AF_XDP socket error on %s: %s", cfg_.ifname.c_str(), strerror(err));
        return false;
    }
    return true;
}

int Pager::timeoutMs(uint64_t nowNs) const noexcept
{
    int timeout = 100; // the tick
    if (!shard_.lead())
        return timeout; // the lead times out missing seqs
    flows_.forEach([&](ServedFlow& f) {
        // Seqs claimed by XDP but not yet published: keep a 1 ms tick so a
        // missing one is seen and timed out promptly.
        if (f.posts.consumed() > f.seq.head())
            timeout = std::min(timeout, 1);
        const uint64_t d = f.seq.nextDeadline();
        if (d != UINT64_MAX)
            timeout = std::min<int64_t>(timeout, d > nowNs ? int64_t((d - nowNs + 999'999) / 1'000'000) : 0);
    });
    return timeout;
}

uint32_t Pager::drainBackup(xsk::QueueSockets& q) noexcept
{
    patches_.clear();
    placements_.clear();
    frames_.clear();
    const uint64_t pickup = monotonicNs();
    uint32_t n = q.peekBackup(xsk::kMaxBatch, [&](const xsk::RxPacket& p) noexcept {
        frames_.insert(frames_.end(), p.frames.begin(), p.frames.begin() + p.nframes);
        uint64_t seq;
        ServedFlow* f = flows_.claim(p.meta, &seq, counters_.claims);
        if (!f)
            return;
        if (cfg_.verifyUdpChecksum && !xsk::csumHolds(p, xsk::sumPayload(p, 0, p.meta.len))) {
            counters_.csumErrors.fetch_add(1, std::memory_order_relaxed);
            f->seq.complete(seq, 0, NPF_CS_BAD_CSUM, NPF_CF_FAULT, pickup);
            return;
        }
        const uint64_t steered = xsk::steeredAtNs(p.meta, pickup); // 0: not stamped
        if (steered)
            steerToPickup.recordSingleWriter(pickup - steered);
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
    (this->*place_)(pickup);
    // The payloads are in the region now: the frames go back at once, so
    // the shared fill ring never starves while faults are being served.
    q.releaseBackup(frames_.data(), static_cast<uint32_t>(frames_.size()));
    return n;
}

void Pager::drainDeferred() noexcept
{
    const std::span<const Deferred> batch = deferred_.take();
    if (batch.empty())
        return;
    const uint64_t pickup = monotonicNs();
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
void Pager::dropAndFetch(uint64_t) noexcept
{
    const uint64_t now = monotonicNs();
    for (size_t i = 0; i < patches_.size(); i++) {
        (void)placements_[i].region->prefetch(patches_[i].offset, patches_[i].len);
        if (!placements_[i].flow)
            continue;
        placements_[i].flow->seq.complete(placements_[i].seq, 0, NPF_CS_LOST, NPF_CF_FAULT, now);
        counters_.faultDrops.fetch_add(1, std::memory_order_relaxed);
    }
}

// A datagram in several patches completes once, OK only if every one of its
// patches was placed.
void Pager::groupByRegion() noexcept
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

void Pager::install(uint64_t pickupNs) noexcept
{
    groupByRegion();
    results_.assign(patches_.size(), 0);
    for (size_t b = 0, e; b < patches_.size(); b = e) {
        Region* region = placements_[b].region;
        for (e = b + 1; e < patches_.size() && placements_[e].region == region; e++) {
        }
        BatchTiming t;
        const std::span<int> res = std::span(results_).subspan(b, e - b);
        int rc = region->applyPatches(std::span<const Patch>(patches_).subspan(b, e - b), res, &t);
        if (rc < 0)
            std::fill(res.begin(), res.end(), rc);
        if (t.imageReady)
            pickupToImage.recordSingleWriter(t.imageReady > pickupNs ? t.imageReady - pickupNs : 0);
        if (t.copyDone && t.imageReady)
            imageToCopy.recordSingleWriter(t.copyDone - t.imageReady);
    }
    const uint64_t now = monotonicNs();
    for (size_t i = 0, end; i < patches_.size(); i = end) {
        const Placement& p = placements_[i];
        int rc = results_[i];
        uint32_t len = patches_[i].len;
        for (end = i + 1; end < patches_.size() && !placements_[end].flow; end++) {
            rc = rc ? rc : results_[end];
            len += patches_[end].len;
        }
        if (rc == 0) {
            p.flow->seq.complete(p.seq, len, p.status, NPF_CF_FAULT, now);
            if (p.tstamp) // 0: a deferred datagram XDP did not stamp
                faultTotal.recordSingleWriter(now > p.tstamp ? now - p.tstamp : 0);
            counters_.faultPath.fetch_add(1, std::memory_order_relaxed);
        } else {
            NPF_WARN_RL("npf pager: placing %u bytes at %llu: %s", len,
                        static_cast<unsigned long long>(patches_[i].offset), strerror(-rc));
            p.flow->seq.complete(p.seq, 0, NPF_CS_LOST, NPF_CF_FAULT, now);
            counters_.placeErrors.fetch_add(1, std::memory_order_relaxed);
        }
        if (!p.flow->faulted.exchange(true, std::memory_order_relaxed) && !owns(p.region))
            wakeOwner(p.region);
    }
}

void Pager::prefetchAhead(bool busy) noexcept
{
    if (cfg_.prefetchDepth == 0)
        return;
    flows_.forEach([&](ServedFlow& f) {
        const uint64_t page = f.region.pageSize();
        if ((busy && page == NPF_PAGE_SIZE) || !owns(&f.region))
            return;
        if (!f.faulted.exchange(false, std::memory_order_relaxed))
            return;
        // The post ring says exactly where the next datagrams of this flow go:
        // prefetchDepth buffers, and with 2 MiB pages at least the buffers
        // of the next two pages.
        const uint64_t cons = f.posts.consumed(), published = f.posts.published();
        uint64_t end = std::min(published, cons + cfg_.prefetchDepth);
        if (page > NPF_PAGE_SIZE && end > cons) {
            const uint64_t first = f.posts.slot(cons).offset / page;
            while (end < published && end < cons + NPF_POST_RING_SIZE && f.posts.slot(end).offset / page < first + 2)
                end++;
        }
        if (busy) {
            // Between two backup batches: one page a round, so the backup
            // ring keeps draining; the flow stays marked for the next round.
            for (uint64_t s = cons; s < end; s++) {
                const dataplane::Post p = f.posts.slot(s);
                if (f.region.isResident(p.offset, p.len))
                    continue;
                (void)f.region.prefetch(p.offset & ~(page - 1), page);
                f.faulted.store(true, std::memory_order_relaxed);
                return;
            }
            return;
        }
        // Buffers are usually posted back to back: install each contiguous
        // run with one call (one batch of UFFDIO_COPYs, one eviction pass).
        uint64_t runOff = 0, runEnd = 0;
        for (uint64_t s = cons; s < end; s++) {
            const dataplane::Post p = f.posts.slot(s);
            if (f.region.isResident(p.offset, p.len))
                continue;
            if (runEnd > runOff && p.offset == runEnd) {
                runEnd += p.len;
                continue;
            }
            if (runEnd > runOff)
                (void)f.region.prefetch(runOff, runEnd - runOff);
            runOff = p.offset;
            runEnd = p.offset + p.len;
        }
        if (runEnd > runOff)
            (void)f.region.prefetch(runOff, runEnd - runOff);
    });
}

// When is a claimed seq that never arrived LOST? XDP claims a seq (CAS on
// the cursor's cons) and puts the frame into an AF_XDP ring in the same
// softirq run: the ring's producer index is published by xdp_do_flush at the
// end of that NAPI poll, which can be milliseconds later on a loaded (or
// preempted) CPU. A softirq run is an RCU read-side critical section, so once
// an RCU grace period that started after cons was read is over, every seq
// below it is in a ring or was dropped. Once the rings have released every
// frame produced by then (a ring's consumer index moves only after the
// batch's seqs were claimed in the sequencer), a seq below the sample that
// is still unclaimed was dropped: settled moves to the sample and the
// sequencer may complete it LOST. No timeout decides this.
void Pager::settleClaims() noexcept
{
    switch (settle_) {
    case Settle::Idle: {
        bool pending = false;
        flows_.forEach([&](ServedFlow& f) {
            f.sampled = f.posts.consumed();
            pending |= f.sampled != f.settled.load(std::memory_order_relaxed);
        });
        if (!pending)
            return;
        try {
            graceTicket_ = grace_->request();
        } catch (const std::exception& e) { // std::system_error from the mutex
            NPF_WARN_RL("npf pager: requesting a grace period: %s", e.what());
            return;
        }
        settle_ = Settle::Barrier;
        return;
    }
    case Settle::Barrier:
        if (!grace_->over(graceTicket_))
            return;
        settleMarks_.clear();
        for (auto& q : queues_)
            settleMarks_.push_back(q->rxMark());
        settle_ = Settle::Drain;
        [[fallthrough]];
    case Settle::Drain:
        for (size_t i = 0; i < queues_.size(); i++)
            if (!queues_[i]->releasedPast(settleMarks_[i]))
                return;
        flows_.forEach([](ServedFlow& f) { f.settled.store(f.sampled, std::memory_order_release); });
        settle_ = Settle::Idle;
        return;
    }
}

} // namespace npf
