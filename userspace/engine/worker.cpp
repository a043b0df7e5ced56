#include "engine/worker.h"

#include <pthread.h>

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
    if (cfg_.runToCompletion) {
        stepReader_.emplace(epochs_);
        return;
    }
    if (cfg_.faultPolicy == FaultPolicy::Block)
        thread_ = std::thread([this] { loop<true>(); });
    else
        thread_ = std::thread([this] { loop<false>(); });
}

uint32_t Worker::step() noexcept
{
    if (!stepReader_ || stop_.load(std::memory_order_acquire) || stepping_.test_and_set(std::memory_order_acquire))
        return 0;
    const uint32_t n = cfg_.faultPolicy == FaultPolicy::Block ? runBatch<true>(*stepReader_)
                                                              : runBatch<false>(*stepReader_);
    stepping_.clear(std::memory_order_release);
    return n;
}

void Worker::stop() noexcept
{
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable())
        thread_.join();
}

// The batch's flows, each once (a batch holds at most kMaxBatch datagrams;
// a node serves up to NPF_MAX_FLOWS flows).
void Worker::Batch::touch(ServedFlow* f) noexcept
{
    for (size_t j = nTouched; j-- > 0;)
        if (touched[j] == f)
            return;
    touched[nTouched++] = f;
}

template <bool kBlock>
void Worker::loop() noexcept
{
    pthread_setname_np(pthread_self(), ("npf-worker-" + std::to_string(queue_.queue())).c_str());
    pinThread(cpu_, "npf worker");
    // Woken by a datagram, the worker should run soon, not after a busy
    // thread's whole slice: the pager's short slice (EEVDF). How soon also
    // depends on what shares its CPU (docs/architecture.md, "What the
    // default wake-up policy costs").
    (void)shortSlice(Pager::kSliceNs);
    EpochDomain::Reader reader(epochs_);
    uint64_t idleSince = 0; // 0: the last batch found datagrams
    while (!stop_.load(std::memory_order_acquire)) {
        if (runBatch<kBlock>(reader)) {
            idleSince = 0;
            continue;
        }
        // Look again for a few microseconds (the next datagram of a burst
        // is usually that close), then sleep in poll(), which the socket's
        // next datagram ends (and which kicks need_wakeup). Not
        // sched_yield(): with a busy thread on this CPU (a local sender) a
        // yield gave it the CPU for its whole slice, 4 ms, datagrams waiting.
        const uint64_t now = monotonicNs();
        if (!idleSince)
            idleSince = now;
        if (now - idleSince < kIdleSpinNs)
            continue;
        idleSince = 0;
        queue_.waitPrimary(10);
    }
}

template <bool kBlock>
uint32_t Worker::runBatch(EpochDomain::Reader& reader) noexcept
{
    rounds_.bump();
    batch_.reset();
    // The epoch section spans the ring peek, every region write of the
    // batch and the publishing: the pager punches no page this batch may
    // still write, and a flow closed meanwhile is freed only after it
    // (FlowTable::close).
    reader.enter();
    const uint32_t n = queue_.pollPrimary(
        xsk::kMaxBatch, [this](std::span<const xsk::RxPacket> pkts) noexcept { placeBatch<kBlock>(pkts); });
    finishBatch();
    reader.exit();
    return n;
}

// One call per batch. Claims come first: a claim is a locked CAS, and a
// locked instruction waits until every earlier store has left the store
// buffer -- after a copy to cold cache lines that is most of the copy's
// cost again. Claiming the whole batch up front keeps the copies free to
// overlap; completions are plain release stores.
template <bool kBlock>
void Worker::placeBatch(std::span<const xsk::RxPacket> pkts) noexcept
{
    ServedFlow* flows[xsk::kMaxBatch];
    uint64_t seqs[xsk::kMaxBatch];
    uint16_t status[xsk::kMaxBatch];
    for (size_t i = 0; i < pkts.size(); i++)
        flows[i] = flows_.claim(pkts[i], &seqs[i], counters_);
    batch_.now = monotonicNs();
    for (size_t i = 0; i < pkts.size(); i++) {
        status[i] = kDeferred;
        if (flows[i]) {
            batch_.touch(flows[i]);
            status[i] = place<kBlock>(*flows[i], seqs[i], pkts[i]);
        }
    }
    for (size_t i = 0; i < pkts.size(); i++)
        if (flows[i] && status[i] != kDeferred)
            complete(*flows[i], seqs[i], status[i], pkts[i].meta);
}

// Copies the payload to dst (gathered from every frame of a multi-buffer
// packet); false if its checksum is wrong.
bool Worker::copy(uint8_t* dst, const xsk::RxPacket& p) const noexcept
{
    const bool verify = cfg_.verifyUdpChecksum;
    const uint64_t sum = xsk::copyPlaced(dst, p, verify);
    return !verify || xsk::csumHolds(p, sum);
}

// Inside the epoch section: a set bit cannot be cleared and the page
// punched until this batch ends (region.h). A clear bit means the page was
// evicted after XDP steered the packet: the pager places it. Block: write
// anyway; a missing page of an in-process region faults this thread and the
// pager serves it through the userfaultfd. A client's memory (npfd) never
// makes the worker wait on a fault: a store that finds its page gone from
// npfd's mapping returns (Region::fastStore) and the pager places the
// datagram. Returns the completion status, or kDeferred.
template <bool kBlock>
uint16_t Worker::place(ServedFlow& f, uint64_t seq, const xsk::RxPacket& p) noexcept
{
    const npf_meta& m = p.meta;
    Region& region = f.region;
    if (kBlock || region.isResident(m.offset, m.len)) {
        bool good = false;
        if (region.fastStore(m.offset, m.len, [&]() noexcept { good = copy(region.base() + m.offset, p); }))
            return good ? statusOf(m) : NPF_CS_BAD_CSUM;
    }
    const int rc =
        pager_.deferred().push(Deferred{&f, seq, m.offset, xsk::steeredAtNs(m, batch_.now), statusOf(m), m.len, nullptr},
                               [&](uint8_t* dst) noexcept { return copy(dst, p); });
    if (rc > 0) {
        counters_.add<&EngineStats::deferred>();
        batch_.deferredAny = true;
        return kDeferred;
    }
    // Refused by the copy: a wrong checksum. Full: counted, LOST.
    if (rc < 0) {
        counters_.add<&EngineStats::deferDrops>();
        NPF_WARN_RL("npf worker %u: the pager's deferred queue is full: datagram completed LOST", queue_.queue());
    }
    return rc == 0 ? NPF_CS_BAD_CSUM : NPF_CS_LOST;
}

void Worker::complete(ServedFlow& f, uint64_t seq, uint16_t status, const npf_meta& m) noexcept
{
    if (status == NPF_CS_BAD_CSUM || status == NPF_CS_LOST) {
        if (status == NPF_CS_BAD_CSUM)
            counters_.add<&EngineStats::csumErrors>();
        f.seq.complete(seq, 0, status, 0, batch_.now);
        return;
    }
    f.region.markReferenced(m.offset, m.len);
    f.seq.complete(seq, m.len, status, 0, batch_.now);
    if (const uint64_t steered = xsk::steeredAtNs(m, batch_.now))
        fastTotal_.recordSingleWriter(batch_.now - steered);
    batch_.placed++;
}

// After the batch: its counts, the pager woken for what it deferred, the
// touched flows' completions published.
void Worker::finishBatch() noexcept
{
    if (batch_.placed)
        counters_.add<&EngineStats::fastPath>(batch_.placed);
    if (batch_.deferredAny)
        pager_.wake();
    if (batch_.nTouched) {
        const uint64_t now = monotonicNs();
        for (size_t j = 0; j < batch_.nTouched; j++)
            batch_.touched[j]->publish(now);
    }
}

} // namespace npf
