// The fast path: one worker per RX queue drains the primary ring and copies
// payloads into resident pages.
#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <span>
#include <string>

#include "engine/engine_impl.h"
#include "sys/log.h"
#include "sys/thread.h"
#include "xsk/payload.h"

namespace npf {

Flow::Impl* claimPacket(Engine::Impl& e, const npf_meta& m, uint64_t* seq) noexcept
{
    Flow::Impl* f = e.flow(m.flow);
    // A frame claimed for an earlier flow under this id: not ours to place.
    if (!f || m.gen != static_cast<uint16_t>(f->gen)) {
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
    pthread_setname_np(pthread_self(), ("npf-worker-" + std::to_string(q.queue())).c_str());
    pinThread(cpu, "npf worker");
    EpochDomain::Reader reader(epochs);
    xsk::EpochHook hook;
    hook.ctx = &reader;
    hook.begin = [](void* r) noexcept -> uint64_t {
        static_cast<EpochDomain::Reader*>(r)->enter();
        return 0;
    };
    hook.end = [](void* r, uint64_t, bool) noexcept { static_cast<EpochDomain::Reader*>(r)->exit(); };

    const bool blocking = cfg.faultPolicy == FaultPolicy::Block;
    const bool verify = cfg.verifyUdpChecksum;
    uint64_t touched = 0; // flows completed in this batch (bit per flow id)
    uint64_t placed = 0;  // datagrams placed in this batch
    uint64_t now = 0;     // time of the batch
    bool deferredAny = false;
    // Copies the payload to dst (gathered from every frame of a multi-buffer
    // packet); false if its checksum is wrong.
    auto copy = [verify](uint8_t* dst, const xsk::RxPacket& p) noexcept {
        const uint64_t sum = xsk::copyPlaced(dst, p, verify);
        return !verify || xsk::csumHolds(p, sum);
    };
    // One call per batch. Claims come first: a claim is a locked CAS, and a
    // locked instruction waits until every earlier store has left the store
    // buffer -- after a copy to cold cache lines that is most of the copy's
    // cost again. Claiming the whole batch up front keeps the copies free to
    // overlap; completions are plain release stores.
    auto sink = [&](std::span<const xsk::RxPacket> pkts) noexcept {
        Flow::Impl* flows[xsk::kMaxBatch];
        uint64_t seqs[xsk::kMaxBatch];
        uint16_t status[xsk::kMaxBatch];
        bool done[xsk::kMaxBatch];
        for (size_t i = 0; i < pkts.size(); i++)
            flows[i] = claimPacket(*this, pkts[i].meta, &seqs[i]);
        now = monotonicNs();
        for (size_t i = 0; i < pkts.size(); i++) {
            const npf_meta& m = pkts[i].meta;
            done[i] = false;
            if (!flows[i])
                continue;
            touched |= 1ull << m.flow;
            // Inside the epoch section: a set bit cannot be cleared and the
            // page punched until this batch ends (region.h). A clear bit means
            // the page was evicted after XDP steered the packet: the pager
            // places it. Block: write anyway; a missing page faults this
            // thread and the pager serves it through the userfaultfd.
            if (blocking || region->isResident(m.offset, m.len)) {
                status[i] = copy(region->base() + m.offset, pkts[i]) ? statusOf(m) : NPF_CS_BAD_CSUM;
                done[i] = true;
                continue;
            }
            std::vector<uint8_t> bytes(m.len);
            if (!copy(bytes.data(), pkts[i])) {
                status[i] = NPF_CS_BAD_CSUM;
                done[i] = true;
                continue;
            }
            std::lock_guard<std::mutex> lock(deferMu);
            deferred.push_back({flows[i], seqs[i], m.offset, statusOf(m), xsk::steeredAtNs(m, now), std::move(bytes)});
            deferredCount.fetch_add(1, std::memory_order_relaxed);
            deferredAny = true;
        }
        for (size_t i = 0; i < pkts.size(); i++) {
            if (!done[i])
                continue;
            const npf_meta& m = pkts[i].meta;
            if (status[i] == NPF_CS_BAD_CSUM) {
                csumErrors.fetch_add(1, std::memory_order_relaxed);
                flows[i]->seq.complete(seqs[i], 0, NPF_CS_BAD_CSUM, 0, now);
                continue;
            }
            region->markReferenced(m.offset, m.len);
            flows[i]->seq.complete(seqs[i], m.len, status[i], 0, now);
            fastLatency.recordSingleWriter(now - xsk::steeredAtNs(m, now));
            placed++;
        }
    };

    int idle = 0;
    while (!stop.load(std::memory_order_acquire)) {
        touched = 0;
        placed = 0;
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
