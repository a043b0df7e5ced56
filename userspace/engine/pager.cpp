// The pager thread: the fault path (backup rings, deferred payloads), CPU
// faults from the userfaultfd, prefetch ahead of faulting flows, settling
// claims (LOST on proof of a drop), and the stats snapshot; and the barrier
// thread that waits for RCU grace periods on its behalf.
#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "engine/engine_impl.h"
#include "sys/log.h"
#include "sys/thread.h"
#include "xsk/payload.h"

namespace npf {

// Stand-in for an RCU grace period where membarrier cannot give one.
constexpr std::chrono::milliseconds kBarrierFallback{1000};

void Engine::Impl::pagerLoop() noexcept
{
    pthread_setname_np(pthread_self(), "npf-pager");
    pinThread(cfg.pagerCpu, "npf pager");
    std::vector<pollfd> fds;
    fds.push_back({region->uffdFd(), POLLIN, 0});
    fds.push_back({wakeFd.get(), POLLIN, 0});
    for (auto& q : queues)
        fds.push_back({q->backupFd(), POLLIN, 0});

    uint64_t nextStats = 0;
    bool busy = false;
    while (!stop.load(std::memory_order_acquire)) {
        // While backup traffic keeps coming, poll only to pick up the other
        // fds: one batch per queue per round, then publish and prefetch, so
        // completions flow and prefetch gets ahead during a long fault burst.
        int rc = ::poll(fds.data(), fds.size(), busy || cfg.pagerBusyPoll ? 0 : pagerTimeoutMs(monotonicNs()));
        if (rc < 0 && errno != EINTR)
            NPF_WARN_RL("npf pager: poll: %s", strerror(errno));
        if (fds[1].revents & POLLIN) {
            uint64_t v;
            (void)!::read(wakeFd.get(), &v, sizeof(v));
        }
        // CPU faults first: a thread is blocked on each of them.
        if (int n = region->serviceFaults(); n < 0)
            NPF_WARN_RL("npf pager: serving CPU faults: %s", strerror(-n));
        busy = false;
        for (auto& q : queues)
            busy |= drainBackup(*q) == xsk::kMaxBatch;
        drainDeferred();
        // Prefetch when there is slack: with the backup ring full, the
        // datagrams themselves bring the pages in at the same cost per page.
        if (!busy)
            prefetchAhead();
        settleClaims();
        const uint64_t now = monotonicNs();
        publishAll(now);
        if (now >= nextStats) {
            writeStatsFile();
            nextStats = now + 500'000'000ull;
            // AF_XDP sockets report no POLLERR: ask them with the snapshot.
            for (auto& q : queues)
                if (socketGone(q->backupFd())) {
                    failServing();
                    return;
                }
        }
    }
    writeStatsFile();
}

// The kernel unbinds every AF_XDP socket of an interface that is deleted or
// leaves the namespace (NETDEV_UNREGISTER) and sets ENETDOWN as its error.
bool Engine::Impl::socketGone(int fd) noexcept
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err == 0)
        return false;
    if (err != ENETDOWN) {
        NPF_WARN_RL("npf pager: AF_XDP socket error on %s: %s", cfg.ifname.c_str(), strerror(err));
        return false;
    }
    return true;
}

void Engine::Impl::failServing() noexcept
{
    NPF_ERR("%s is gone (deleted, or moved out of this network namespace): the engine stops serving it",
            cfg.ifname.c_str());
    ifaceGone.store(true, std::memory_order_release);
    stop.store(true, std::memory_order_release);
    // Wake every application thread blocked in Flow::wait: Engine::failure() says why.
    for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++)
        if (Flow::Impl* f = flow(id)) {
            const uint64_t one = 1;
            (void)!::write(f->ring.eventFd(), &one, sizeof(one));
        }
}

int Engine::Impl::pagerTimeoutMs(uint64_t nowNs) const noexcept
{
    int timeout = 100; // the stats snapshot
    for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++) {
        Flow::Impl* f = flow(id);
        if (!f)
            continue;
        // Seqs claimed by XDP but not yet published: keep a 1 ms tick so a
        // missing one is seen and timed out promptly.
        if (__atomic_load_n(&f->cursor->cons, __ATOMIC_ACQUIRE) > f->seq.head())
            timeout = std::min(timeout, 1);
        uint64_t d = f->seq.nextDeadline();
        if (d != UINT64_MAX)
            timeout = std::min<int64_t>(timeout, d > nowNs ? int64_t((d - nowNs + 999'999) / 1'000'000) : 0);
    }
    return timeout;
}

uint32_t Engine::Impl::drainBackup(xsk::QueueSockets& q) noexcept
{
    patches.clear();
    placements.clear();
    frames.clear();
    const uint64_t pickup = monotonicNs();
    uint32_t n = q.peekBackup(xsk::kMaxBatch, [&](const xsk::RxPacket& p) noexcept {
        frames.insert(frames.end(), p.frames.begin(), p.frames.begin() + p.nframes);
        uint64_t seq;
        Flow::Impl* f = claimPacket(*this, p.meta, &seq);
        if (!f)
            return;
        if (cfg.verifyUdpChecksum && !xsk::csumHolds(p, xsk::sumPayload(p, 0, p.meta.len))) {
            csumErrors.fetch_add(1, std::memory_order_relaxed);
            f->seq.complete(seq, 0, NPF_CS_BAD_CSUM, NPF_CF_FAULT, pickup);
            return;
        }
        const uint64_t steered = xsk::steeredAtNs(p.meta, pickup);
        steerToPickup.recordSingleWriter(pickup - steered);
        // One patch per frame the payload lies in (a jumbo datagram spans
        // several); the placements of the patches after the first have no
        // flow: they belong to the datagram before them (see place()).
        uint32_t at = 0, i = 0;
        do {
            const uint8_t* data = i < p.pieces ? p.piece[i].data : p.payload;
            const uint32_t len = i < p.pieces ? std::min(p.piece[i].len, p.meta.len - at) : 0;
            patches.push_back({p.meta.offset + at, data, len});
            placements.push_back(i == 0 ? Placement{f, seq, statusOf(p.meta), steered} : Placement{nullptr, 0, 0, 0});
            at += len;
        } while (++i < p.pieces && at < p.meta.len);
    });
    if (n == 0)
        return 0;
    place(pickup);
    // The payloads are in the region now: the frames go back at once, so
    // the shared fill ring never starves while faults are being served.
    q.releaseBackup(frames.data(), static_cast<uint32_t>(frames.size()));
    return n;
}

void Engine::Impl::drainDeferred() noexcept
{
    std::vector<Deferred> batch;
    {
        std::lock_guard<std::mutex> lock(deferMu);
        batch.swap(deferred);
    }
    if (batch.empty())
        return;
    const uint64_t pickup = monotonicNs();
    patches.clear();
    placements.clear();
    for (const Deferred& d : batch) {
        patches.push_back({d.offset, d.bytes.data(), static_cast<uint32_t>(d.bytes.size())});
        placements.push_back({d.flow, d.seq, d.status, d.tstamp});
    }
    place(pickup);
}

// patches[i] belongs to placements[i]; a placement without a flow continues
// the datagram of the one before it (a payload in several frames), which
// completes once, OK only if every one of its patches was placed.
void Engine::Impl::place(uint64_t pickupNs) noexcept
{
    if (cfg.faultPolicy == FaultPolicy::Drop) {
        // A NIC without network page faults: the datagram is gone, the OS
        // brings the page in for the next one.
        const uint64_t now = monotonicNs();
        for (size_t i = 0; i < patches.size(); i++) {
            (void)region->prefetch(patches[i].offset, patches[i].len);
            if (!placements[i].flow)
                continue;
            placements[i].flow->seq.complete(placements[i].seq, 0, NPF_CS_LOST, NPF_CF_FAULT, now);
            faultDrops.fetch_add(1, std::memory_order_relaxed);
        }
        return;
    }
    results.assign(patches.size(), 0);
    BatchTiming t;
    int rc = region->applyPatches(patches, results, &t);
    if (rc < 0)
        std::fill(results.begin(), results.end(), rc);
    if (t.imageReady)
        pickupToImage.recordSingleWriter(t.imageReady > pickupNs ? t.imageReady - pickupNs : 0);
    if (t.copyDone && t.imageReady)
        imageToCopy.recordSingleWriter(t.copyDone - t.imageReady);
    const uint64_t now = monotonicNs();
    for (size_t i = 0, end; i < patches.size(); i = end) {
        const Placement& p = placements[i];
        int rc = results[i];
        uint32_t len = patches[i].len;
        for (end = i + 1; end < patches.size() && !placements[end].flow; end++) {
            rc = rc ? rc : results[end];
            len += patches[end].len;
        }
        if (rc == 0) {
            p.flow->seq.complete(p.seq, len, p.status, NPF_CF_FAULT, now);
            faultTotal.recordSingleWriter(now > p.tstamp ? now - p.tstamp : 0);
            faultPath.fetch_add(1, std::memory_order_relaxed);
        } else {
            NPF_WARN_RL("npf pager: placing %u bytes at %llu: %s", len,
                        static_cast<unsigned long long>(patches[i].offset), strerror(-rc));
            p.flow->seq.complete(p.seq, 0, NPF_CS_LOST, NPF_CF_FAULT, now);
            placeErrors.fetch_add(1, std::memory_order_relaxed);
        }
        p.flow->faulted.store(true, std::memory_order_relaxed);
    }
}

void Engine::Impl::prefetchAhead() noexcept
{
    if (cfg.prefetchDepth == 0)
        return;
    for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++) {
        Flow::Impl* f = flow(id);
        if (!f || !f->faulted.exchange(false, std::memory_order_relaxed))
            continue;
        // The post ring says exactly where the next datagrams of this flow go.
        const uint64_t cons = __atomic_load_n(&f->cursor->cons, __ATOMIC_ACQUIRE);
        const uint64_t prod = __atomic_load_n(&f->cursor->prod, __ATOMIC_ACQUIRE);
        const uint64_t end = std::min(prod, cons + cfg.prefetchDepth);
        // Buffers are usually posted back to back: install each contiguous
        // run with one call (one batch of UFFDIO_COPYs, one eviction pass).
        uint64_t runOff = 0, runEnd = 0;
        for (uint64_t s = cons; s < end; s++) {
            const npf_post& p = f->posts[s & kPostMask];
            const uint64_t off = __atomic_load_n(&p.offset, __ATOMIC_RELAXED);
            const uint32_t len = __atomic_load_n(&p.len, __ATOMIC_RELAXED);
            if (region->isResident(off, len))
                continue;
            if (runEnd > runOff && off == runEnd) {
                runEnd += len;
                continue;
            }
            if (runEnd > runOff)
                (void)region->prefetch(runOff, runEnd - runOff);
            runOff = off;
            runEnd = off + len;
        }
        if (runEnd > runOff)
            (void)region->prefetch(runOff, runEnd - runOff);
    }
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
void Engine::Impl::settleClaims() noexcept
{
    switch (settle) {
    case Settle::Idle: {
        bool pending = false;
        for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++)
            if (Flow::Impl* f = flow(id)) {
                f->sampled = __atomic_load_n(&f->cursor->cons, __ATOMIC_ACQUIRE);
                pending |= f->sampled != f->settled.load(std::memory_order_relaxed);
            }
        if (!pending)
            return;
        {
            std::lock_guard<std::mutex> lock(barrierMu);
            ++barrierRequested;
        }
        barrierCv.notify_one();
        settle = Settle::Barrier;
        return;
    }
    case Settle::Barrier: {
        std::lock_guard<std::mutex> lock(barrierMu);
        if (barrierDone.load(std::memory_order_acquire) != barrierRequested)
            return;
        settleMarks.clear();
        for (auto& q : queues)
            settleMarks.push_back(q->rxMark());
        settle = Settle::Drain;
        [[fallthrough]];
    }
    case Settle::Drain:
        for (size_t i = 0; i < queues.size(); i++)
            if (!queues[i]->releasedPast(settleMarks[i]))
                return;
        for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++)
            if (Flow::Impl* f = flow(id))
                f->settled.store(f->sampled, std::memory_order_release);
        settle = Settle::Idle;
        return;
    }
}

// Waits for RCU grace periods on behalf of the pager (a grace period takes
// milliseconds; the pager must not block). membarrier(MEMBARRIER_CMD_GLOBAL)
// is synchronize_rcu(). Without it (nohz_full kernels refuse it) a fixed
// wait stands in: long enough for any softirq run, never a proof.
void Engine::Impl::barrierLoop() noexcept
{
    pthread_setname_np(pthread_self(), "npf-barrier");
    bool warned = false;
    std::unique_lock<std::mutex> lock(barrierMu);
    for (;;) {
        barrierCv.wait(lock, [&] {
            return stop.load(std::memory_order_acquire) ||
                   barrierRequested != barrierDone.load(std::memory_order_relaxed);
        });
        if (stop.load(std::memory_order_acquire))
            return;
        const uint64_t want = barrierRequested;
        lock.unlock();
        if (::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) {
            if (!warned)
                NPF_WARN("membarrier(MEMBARRIER_CMD_GLOBAL): %s; a missing datagram completes LOST after %llu ms "
                         "instead of on proof",
                         strerror(errno), static_cast<unsigned long long>(kBarrierFallback.count()));
            warned = true;
            std::this_thread::sleep_for(kBarrierFallback);
        }
        lock.lock();
        barrierDone.store(want, std::memory_order_release);
        wakePager();
    }
}

void Engine::Impl::publishAll(uint64_t nowNs) noexcept
{
    for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++)
        if (Flow::Impl* f = flow(id))
            f->publish(nowNs);
}

} // namespace npf
