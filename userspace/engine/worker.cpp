// The fast path: one worker per RX queue drains the primary ring and copies
// payloads into resident pages.
#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "engine/engine_impl.h"
#include "sys/log.h"

namespace npf {

void setThreadCpu(int cpu, const char* who) noexcept
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
        NPF_WARN("pinning %s to CPU %d: %s", who, cpu, strerror(rc));
}


Flow::Impl* claimPacket(Engine::Impl& e, const npf_meta& m, uint64_t* seq) noexcept
{
    Flow::Impl* f = e.flow(m.flow);
    if (!f) {
        e.rejected.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
    }
    Sequencer::Claim c = f->seq.claim(m.seq);
    if (c.rc) {
        e.rejected.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
    }
    const npf_post& p = f->posts[c.seq & kPostMask];
    if (__atomic_load_n(&p.offset, __ATOMIC_RELAXED) != m.offset ||
        m.len > __atomic_load_n(&p.len, __ATOMIC_RELAXED)) {
        e.mismatch.fetch_add(1, std::memory_order_relaxed);
        f->seq.complete(c.seq, 0, NPF_CS_LOST, 0);
        return nullptr;
    }
    *seq = c.seq;
    return f;
}

void Engine::Impl::workerLoop(xsk::QueueSockets& q, LatencyHistogram& fastLatency, int cpu) noexcept
{
    setThreadCpu(cpu, "npf worker");
    EpochDomain::Reader reader(epochs);
    xsk::EpochHook hook;
    hook.ctx = &reader;
    hook.begin = [](void* r) noexcept -> uint64_t {
        static_cast<EpochDomain::Reader*>(r)->enter();
        return 0;
    };
    hook.end = [](void* r, uint64_t, bool) noexcept { static_cast<EpochDomain::Reader*>(r)->exit(); };

    const bool blocking = cfg.faultPolicy == FaultPolicy::Block;
    uint64_t touched = 0; // flows completed in this batch (bit per flow id)
    uint64_t placed = 0;  // datagrams placed in this batch
    uint64_t now = 0;     // time of the batch's first placement
    bool deferredAny = false;
    auto sink = [&](const xsk::RxPacket& p) noexcept {
        const npf_meta& m = p.meta;
        uint64_t seq;
        Flow::Impl* f = claimPacket(*this, m, &seq);
        if (!f)
            return;
        touched |= 1ull << m.flow;
        // Inside the epoch section: a set bit cannot be cleared and the page
        // punched until this batch ends (region.h). A clear bit means the page
        // was evicted after XDP steered the packet: the pager places it.
        // Block: write anyway; a missing page faults this thread and the
        // pager serves it through the userfaultfd.
        if (blocking || region->isResident(m.offset, m.len)) {
            std::memcpy(region->base() + m.offset, p.payload, m.len);
            region->markReferenced(m.offset, m.len);
            if (!now)
                now = monotonicNs(); // once per batch: clock reads cost as much as a small copy
            f->seq.complete(seq, m.len, statusOf(m), 0, now);
            fastLatency.recordSingleWriter(now > m.tstamp ? now - m.tstamp : 0);
            placed++;
            return;
        }
        Deferred d{f, seq, m.offset, statusOf(m), m.tstamp, std::vector<uint8_t>(p.payload, p.payload + m.len)};
        {
            std::lock_guard<std::mutex> lock(deferMu);
            deferred.push_back(std::move(d));
        }
        deferredCount.fetch_add(1, std::memory_order_relaxed);
        deferredAny = true;
    };

    int idle = 0;
    while (!stop.load(std::memory_order_acquire)) {
        touched = 0;
        placed = 0;
        now = 0;
        deferredAny = false;
        uint32_t n = q.pollPrimary(xsk::kMaxBatch, sink, hook);
        if (placed)
            fastPath.fetch_add(placed, std::memory_order_relaxed);
        if (deferredAny)
            wakePager();
        if (touched) {
            now = monotonicNs();
            for (uint64_t t = touched; t; t &= t - 1)
                if (Flow::Impl* f = flow(static_cast<uint32_t>(__builtin_ctzll(t))))
                    f->publish(now);
        }
        if (n) {
            idle = 0;
            continue;
        }
        // Two vCPUs are shared with the pager and often the sender: spin
        // briefly, then sleep in poll() (which also kicks need_wakeup).
        if (++idle < 16) {
            sched_yield();
            continue;
        }
        q.waitPrimary(10);
    }
}

} // namespace npf
