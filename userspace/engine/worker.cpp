#include "engine/worker.h"

#include <pthread.h>
#include <sched.h>

#include <span>
#include <string>

#include "sys/clock.h"
#include "sys/log.h"
#include "sys/thread.h"
#include "xsk/payload.h"

namespace npf {

Worker::Worker(const EngineConfig& cfg, xsk::QueueSockets& queue, EpochDomain& epochs,
               FlowTable& flows, Pager& pager, int cpu)
    : cfg_(cfg), queue_(queue), epochs_(epochs), flows_(flows), pager_(pager), cpu_(cpu)
{
}

Worker::~Worker() { stop(); }

void Worker::start()
{
    if (cfg_.faultPolicy == FaultPolicy::Block)
        thread_ = std::thread([this] { loop<true>(); });
    else
        thread_ = std::thread([this] { loop<false>(); });
}

void Worker::stop() noexcept
{
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable())
        thread_.join();
}

template <bool kBlock>
void Worker::loop() noexcept
{
    pthread_setname_np(pthread_self(), ("npf-worker-" + std::to_string(queue_.queue())).c_str());
    pinThread(cpu_, "npf worker");
    EpochDomain::Reader reader(epochs_);
    const bool verify = cfg_.verifyUdpChecksum;
    // Flows completed in this batch, each once (a batch holds at most
    // kMaxBatch datagrams; a node serves up to NPF_MAX_FLOWS flows).
    ServedFlow* touched[xsk::kMaxBatch];
    size_t nTouched = 0;
    auto touch = [&](ServedFlow* f) noexcept {
        for (size_t j = nTouched; j-- > 0;)
            if (touched[j] == f)
                return;
        touched[nTouched++] = f;
    };
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
        ServedFlow* flows[xsk::kMaxBatch];
        uint64_t seqs[xsk::kMaxBatch];
        uint16_t status[xsk::kMaxBatch];
        bool done[xsk::kMaxBatch];
        for (size_t i = 0; i < pkts.size(); i++)
            flows[i] = flows_.claim(pkts[i].meta, &seqs[i], counters_);
        now = monotonicNs();
        for (size_t i = 0; i < pkts.size(); i++) {
            const npf_meta& m = pkts[i].meta;
            done[i] = false;
            if (!flows[i])
                continue;
            touch(flows[i]);
            // Inside the epoch section: a set bit cannot be cleared and the
            // page punched until this batch ends (region.h). A clear bit means
            // the page was evicted after XDP steered the packet: the pager
            // places it. Block: write anyway; a missing page faults this
            // thread and the pager serves it through the userfaultfd.
            Region& region = flows[i]->region;
            if (kBlock || region.isResident(m.offset, m.len)) {
                status[i] = copy(region.base() + m.offset, pkts[i]) ? statusOf(m) : NPF_CS_BAD_CSUM;
                done[i] = true;
                continue;
            }
            const int rc = pager_.deferred().push(
                Deferred{flows[i], seqs[i], m.offset, xsk::steeredAtNs(m, now), statusOf(m), m.len, nullptr},
                [&](uint8_t* dst) noexcept { return copy(dst, pkts[i]); });
            if (rc > 0) {
                counters_.add<&EngineStats::deferred>();
                deferredAny = true;
                continue;
            }
            // Refused by the copy: a wrong checksum. Full: counted, LOST.
            status[i] = rc == 0 ? NPF_CS_BAD_CSUM : NPF_CS_LOST;
            if (rc < 0) {
                counters_.add<&EngineStats::deferDrops>();
                NPF_WARN_RL("npf worker %u: the pager's deferred queue is full: datagram completed LOST",
                            queue_.queue());
            }
            done[i] = true;
        }
        for (size_t i = 0; i < pkts.size(); i++) {
            if (!done[i])
                continue;
            const npf_meta& m = pkts[i].meta;
            if (status[i] == NPF_CS_BAD_CSUM || status[i] == NPF_CS_LOST) {
                if (status[i] == NPF_CS_BAD_CSUM)
                    counters_.add<&EngineStats::csumErrors>();
                flows[i]->seq.complete(seqs[i], 0, status[i], 0, now);
                continue;
            }
            flows[i]->region.markReferenced(m.offset, m.len);
            flows[i]->seq.complete(seqs[i], m.len, status[i], 0, now);
            if (const uint64_t steered = xsk::steeredAtNs(m, now))
                fastTotal_.recordSingleWriter(now - steered);
            placed++;
        }
    };

    int idle = 0;
    while (!stop_.load(std::memory_order_acquire)) {
        nTouched = 0;
        placed = 0;
        deferredAny = false;
        // The epoch section spans the ring peek, every region write of the
        // batch and the publishing: the pager punches no page this batch may
        // still write, and a flow closed meanwhile is freed only after it
        // (FlowTable::close).
        reader.enter();
        const uint32_t n = queue_.pollPrimary(xsk::kMaxBatch, sink);
        if (placed)
            counters_.add<&EngineStats::fastPath>(placed);
        if (deferredAny)
            pager_.wake();
        if (nTouched) {
            now = monotonicNs();
            for (size_t j = 0; j < nTouched; j++)
                touched[j]->publish(now);
        }
        reader.exit();
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
        queue_.waitPrimary(10);
    }
}

} // namespace npf
