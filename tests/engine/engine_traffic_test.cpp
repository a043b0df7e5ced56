// npf::Engine end to end: real datagrams from the peer namespace, every byte
// and the order checked, counters that add up. Cold region and a budget far
// below the data (4 KiB and 2 MiB pages), eviction churn, two RX queues,
// payload sizes and truncation.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine_fixture.h"
#include "region/page_pool.h"
#include "region/route_probe.h"
#include "region/uffd.h"
#include "huge_pages.h"

namespace npf::e2e {
namespace {

constexpr uint16_t kPort = 7100;
using namespace std::chrono_literals;

uint32_t sizeVaried(uint32_t k) { return 1472 - (k * 37) % 600; }
uint32_t size1472(uint32_t) { return 1472; }

void printNumbers(const char* test, const Sender& tx, const EngineStats& s)
{
    std::printf("[ numbers  ] %s: %llu datagrams in %.2f s = %.0f/s (%llu send retries); %s\n", test,
                (unsigned long long)tx.sent(), tx.seconds(), tx.sent() / std::max(tx.seconds(), 1e-9),
                (unsigned long long)tx.retries(), numbers(s).c_str());
}

// Senders here use flow control (SendPlan::window): a datagram goes out only
// while fewer than a window's worth are in flight, so none can find no buffer
// or overflow a ring however slowly this machine runs the receiver. "Nothing
// lost" and "all of them OK" then hold on a loaded machine too; no test
// asserts a rate.

// Page sizes of the cold and budget tests: 4 KiB, and 2 MiB; the region's
// memory the engine picks (the page pool where the kernel has UFFDIO_MOVE:
// 2 MiB pages are THP then), or a memfd (hugetlbfs for 2 MiB: the test
// reserves its huge pages and gives them back); with one pager, and with
// two: on one queue, pager 0 drains the backup ring while pager 1 owns the
// region (its CPU faults, prefetch and eviction calls), both installing
// into it; and run to completion (no worker thread: the test's own wait()
// and poll() calls run the fast path).
struct PagesCase {
    uint64_t pageSize;
    uint32_t pagers;
    RegionMemory memory = RegionMemory::Auto;
    bool runToCompletion = false;
};

class EnginePages : public EngineE2E, public ::testing::WithParamInterface<PagesCase> {
protected:
    static constexpr uint64_t kHuge = 2ull << 20;
    uint64_t pageSize() const { return GetParam().pageSize; }
    bool huge() const { return pageSize() == kHuge; }
    EngineConfig config(uint64_t budget = 0) const
    {
        return {.regionSize = 64ull << 20, .residentBudget = budget, .pageSize = pageSize(),
                .regionMemory = GetParam().memory, .runToCompletion = GetParam().runToCompletion,
                .pagerThreads = GetParam().pagers};
    }
    // Pages moved in from the region's page pool and back: asked for, or
    // Auto's pick (2 MiB: where the kernel has THP; 4 KiB: where the pool's
    // cycle is the cheaper one on this host, region/route_probe.h).
    bool pooled() const
    {
        const bool autoPool = huge() ? transparentHugePagesOffered() : routes4k().poolFaster();
        return userfaultfdHasMove() && (GetParam().memory == RegionMemory::PagePool ||
                                        (GetParam().memory == RegionMemory::Auto && autoPool));
    }
    // The route Region::route() names for this case.
    std::string route() const
    {
        if (GetParam().memory == RegionMemory::Memfd)
            return huge() ? "hugetlbfs-2m" : "memfd-4k";
        if (pooled())
            return huge() ? "pool-2m-thp" : "pool-4k";
        return huge() ? "hugetlbfs-2m" : "anon-4k";
    }
    // The hugetlbfs pages a 2 MiB memfd case needs (none otherwise); skip() says why a case cannot run.
    void reserve(uint64_t pages)
    {
        if (huge() && GetParam().memory == RegionMemory::Memfd)
            pool_ = std::make_unique<topology::HugePages>(pages);
    }
    std::string skip() const { return pool_ && !pool_->ok() ? "2 MiB huge pages unavailable: " + pool_->why() : ""; }

private:
    std::unique_ptr<topology::HugePages> pool_;
};

INSTANTIATE_TEST_SUITE_P(PageSize, EnginePages,
                         ::testing::Values(PagesCase{4096, 1}, PagesCase{2ull << 20, 1}, PagesCase{4096, 2},
                                           PagesCase{2ull << 20, 2}, PagesCase{4096, 1, RegionMemory::Memfd},
                                           PagesCase{2ull << 20, 1, RegionMemory::Memfd},
                                           PagesCase{2ull << 20, 2, RegionMemory::Memfd},
                                           PagesCase{4096, 1, RegionMemory::PagePool},
                                           PagesCase{4096, 1, RegionMemory::Auto, true},
                                           PagesCase{2ull << 20, 1, RegionMemory::Auto, true}),
                         [](const auto& i) {
                             return std::string(i.param.pageSize == 4096 ? "4K" : "2M") +
                                    (i.param.pagers > 1 ? "_" + std::to_string(i.param.pagers) + "pagers" : "") +
                                    (i.param.memory == RegionMemory::Memfd      ? "_memfd"
                                     : i.param.memory == RegionMemory::PagePool ? "_pool"
                                                                                : "") +
                                    (i.param.runToCompletion ? "_runToCompletion" : "");
                         });

// 1. Cold region: nothing resident at the start. Buffers at a 1500-byte
// stride so payloads straddle page borders. Nothing lost, bit-exact, in
// order; the first datagrams take the fault path, prefetch populates the
// posted buffers ahead, and every datagram is placed by exactly one path.
// With 2 MiB pages each page is installed once, for the first datagram.
TEST_P(EnginePages, ColdRegionNothingLostBitExactInOrder)
{
    reserve(33);
    if (std::string why = skip(); !why.empty())
        GTEST_SKIP() << why;
    Rig rig;
    EngineInNs eng(rig, config());
    ASSERT_EQ(eng->stats().residentPages, 0u) << "region must start cold";
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = 20000;
    Checker chk(*eng, flow, {.stride = 1500, .depth = 4096, .len = [](uint64_t) { return 1472u; }},
                [](uint32_t id) { return sizeVaried(id); });
    chk.postInitial();
    ASSERT_EQ(eng->stats().residentPages, 0u) << "posting must not populate";
    Stream tx(rig, chk, {.count = count, .dstPort = kPort, .size = sizeVaried});
    ASSERT_EQ(tx.run(), "");
    const CheckTotals& t = chk.totals();
    EngineStats s = eng->stats();
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_EQ(t.ok, count);
    EXPECT_EQ(t.verified, count);
    EXPECT_TRUE(tx.accounted(s));
    EXPECT_GT(s.faultPath, 0u) << "a cold region must use the fault path";
    EXPECT_GT(s.packetFaults, 0u);
    EXPECT_EQ(t.faultFlag, s.faultPath) << "NPF_CF_FAULT flags must match the fault-path counter";
    EXPECT_EQ(s.fastPath + s.faultPath, count) << "every datagram is placed once, by the worker or the pager";
    if (huge()) {
        // 20000 x 1500 B = 29 MiB of buffers: 15 huge pages, each installed once.
        EXPECT_LE(s.packetFaults + s.prefetched + s.cpuFaults, 32u) << numbers(s);
        EXPECT_EQ(s.residentPages % 512, 0u) << "resident_pages counts 4 KiB pages, 512 per huge page";
    } else {
        EXPECT_GT(s.prefetched, 0u);
    }
    // A CPU fault on a page no datagram touched: served by the region's
    // owner (pager 1 of two), zeros.
    const uint8_t* untouched = eng->region() + (48ull << 20);
    EXPECT_EQ(*reinterpret_cast<const volatile uint8_t*>(untouched), 0);
    EXPECT_EQ(eng->stats().cpuFaults, s.cpuFaults + 1);
    printNumbers(huge() ? "cold 2M" : "cold", tx.sender(), s);
}

// 2. Eviction churn: a thread evicts everything it may (not posted buffers)
// every 2 ms while traffic flows. Completed buffers are read only 3000
// completions later, after they were most likely evicted: their content must
// come back from the spill bit-exact. Then release() + evict: zeros.
TEST_F(EngineE2E, EvictionChurnKeepsCompletedBuffersBitExact)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 64ull << 20});
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = 20000;
    Checker chk(*eng, flow, {.stride = 2048, .depth = 4096}, [](uint32_t id) { return sizeVaried(id); });
    chk.postInitial();
    Stream tx(rig, chk, {.count = count, .dstPort = kPort, .size = sizeVaried});
    std::atomic<bool> done{false};
    std::atomic<uint64_t> evictedByCalls{0}, calls{0};
    std::thread churn([&] {
        while (!done.load()) {
            evictedByCalls += eng->evictAll();
            calls++;
            std::this_thread::sleep_for(2ms);
        }
    });
    const std::string sendError = tx.run(count, 3000);
    done = true;
    churn.join();
    const uint64_t restoredBefore = eng->stats().restored;
    eng->evictAll();
    chk.verifyPending(); // every one of the last 3000 was just evicted
    ASSERT_EQ(sendError, "");
    EngineStats s = eng->stats();
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_EQ(chk.totals().verified, count);
    EXPECT_TRUE(tx.accounted(s));
    EXPECT_GT(evictedByCalls.load(), 0u);
    EXPECT_GT(s.restored, restoredBefore) << "reading evicted buffers must restore them from the spill";
    EXPECT_GT(s.cpuFaults, 0u);
    printNumbers("churn", tx.sender(), s);
    std::printf("[ numbers  ] churn: %llu evictAll calls evicted %llu pages during traffic\n",
                (unsigned long long)calls.load(), (unsigned long long)evictedByCalls.load());

    // Buffers 0..1023 (2 MiB) were completed and verified: release the first
    // MiB, evict, read: zeros; the second MiB comes back with its content.
    eng->release(0, 1 << 20);
    eng->evictAll();
    const uint8_t* r = eng->region();
    uint64_t nonzero = 0;
    for (uint64_t i = 0; i < (1 << 20); i++)
        nonzero += r[i] != 0;
    EXPECT_EQ(nonzero, 0u) << "released pages must come back zeroed";
    for (uint64_t p = 512; p < 1024; p++) {
        const uint32_t size = sizeVaried(static_cast<uint32_t>(p));
        ASSERT_TRUE(std::equal(r + p * 2048, r + p * 2048 + size, payloadFor(uint32_t(p), size).begin()))
            << "buffer " << p << " (not released) changed after release + evict";
    }
}

// 3. Budget far below the data: 1 MiB (4 KiB pages) or 8 MiB (four 2 MiB
// pages) for 64 MiB of region and 17+ MiB of data: everything is verified
// after the traffic (almost all of it restored from the spill), and
// residency never exceeds the budget by more than one batch.
TEST_P(EnginePages, BudgetFarBelowDataStaysWithinBudget)
{
    reserve(6);
    if (std::string why = skip(); !why.empty())
        GTEST_SKIP() << why;
    Rig rig;
    const uint64_t budget = huge() ? 4 * kHuge : 1 << 20;
    EngineInNs eng(rig, config(budget));
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = 12500; // x 1472 B = 17.5 MiB
    // 256 posted buffers = 128 pages (posted pages cannot be evicted): half
    // the 4 KiB budget; one huge page (two at a border) of the 2 MiB one.
    Checker chk(*eng, flow, {.stride = 2048, .depth = 256}, size1472);
    chk.postInitial();
    std::atomic<bool> done{false};
    std::atomic<uint64_t> maxResident{0}, samples{0};
    std::thread sampler([&] {
        while (!done.load()) {
            uint64_t r = eng->stats().residentPages;
            if (r > maxResident.load())
                maxResident = r;
            samples++;
            std::this_thread::sleep_for(1ms);
        }
    });
    Stream tx(rig, chk, {.count = count, .dstPort = kPort, .size = size1472});
    const std::string sendError = tx.run(count, count);
    const uint64_t maxDuringTraffic = maxResident.load();
    chk.verifyPending();
    done = true;
    sampler.join();
    ASSERT_EQ(sendError, "");
    EngineStats s = eng->stats();
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_EQ(chk.totals().verified, count);
    EXPECT_TRUE(tx.accounted(s));
    // resident_pages counts 4 KiB pages; a batch is 64 of them, or one huge page.
    const uint64_t budgetPages = budget / 4096, batch = huge() ? 512 : 64;
    EXPECT_LE(maxResident.load(), budgetPages + batch)
        << "resident pages peaked at " << maxResident.load() << " (" << samples.load() << " samples)";
    EXPECT_GT(s.evicted * (pageSize() / 4096), count * 1472ull / 4096 / 2) << "most of the data must have been evicted";
    EXPECT_GT(s.restored, 0u);
    const auto stats = nlohmann::json::parse(eng->statsJson());
    const auto region = stats["region"];
    EXPECT_EQ(stats["route"], route()) << "where the pages came from";
    if (pooled()) { // pages came from the pool and went back to it
        EXPECT_GT(region["pool_installs"].get<uint64_t>(), 0u) << region.dump();
        EXPECT_GT(region["pool_returns"].get<uint64_t>(), 0u) << region.dump();
    } else {
        EXPECT_EQ(region["move_calls"].get<uint64_t>(), 0u) << region.dump();
    }
    printNumbers(huge() ? "budget 2M" : "budget", tx.sender(), s);
    std::printf("[ numbers  ] budget: %llu pages budget, peak %llu during traffic, %llu with verification reads\n",
                (unsigned long long)budgetPages, (unsigned long long)maxDuringTraffic,
                (unsigned long long)maxResident.load());
}

// Which RX queue a sender socket's packets land on: one probe datagram to a
// port that is not a flow (XDP passes it), seen in the veth's per-queue XDP
// counters. -1 if it could not be told.
int probeQueue(Rig& rig, Sender& s, uint16_t port)
{
    Counters before = rig.rxEthtool();
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(port);
    inet_pton(AF_INET, rig.rxAddr().c_str(), &d.sin_addr);
    const char probe[] = "probe";
    if (sendto(s.fd(), probe, sizeof(probe), 0, reinterpret_cast<sockaddr*>(&d), sizeof(d)) < 0)
        return -1;
    Counters d2;
    test::waitUntil([&] {
        d2 = delta(rig.rxEthtool(), before);
        return d2["rx_queue_0_xdp_packets"] + d2["rx_queue_1_xdp_packets"] > 0;
    });
    bool q0 = d2["rx_queue_0_xdp_packets"] == 1, q1 = d2["rx_queue_1_xdp_packets"] == 1;
    return q0 == q1 ? -1 : (q0 ? 0 : 1);
}

// 4. Two RX queues (native XDP), one sender on each: the veth RX queue is
// the sender socket's TX queue, picked per socket by the kernel, so sockets
// are probed until one lands on each queue. EngineStats has no per-queue
// counters: the queues are told apart by the veth's ethtool counters.
// Run with one pager, and with two under a budget: each pager drains one
// queue's backup ring into the one region (pager 0 owns it) while eviction
// runs, and every datagram still completes once, bit-exact, in order.
void twoQueues(uint32_t pagers, uint64_t budget)
{
    Rig rig({.queues = 2});
    EngineInNs eng(rig, {.mode = XdpMode::Native, .regionSize = 64ull << 20, .residentBudget = budget,
                         .pagerThreads = pagers});
    ASSERT_EQ(eng->queues(), 2u);
    Flow& flow = eng->openFlow(kPort);
    const uint32_t perSender = 10000;
    std::unique_ptr<Sender> onQueue[2];
    uint32_t sid[2] = {0, 0}; // sender id (top byte of its datagram ids) per queue
    std::vector<std::unique_ptr<Sender>> probed;
    for (uint16_t i = 0; i < 24 && !(onQueue[0] && onQueue[1]); i++) {
        auto s = std::make_unique<Sender>(
            rig.veth(), SendPlan{.sender = i, .count = perSender, .srcPort = uint16_t(42000 + i), .dstPort = kPort,
                                 .size = sizeVaried});
        int q = probeQueue(rig, *s, kPort + 1);
        if (q >= 0 && !onQueue[q]) {
            sid[q] = i;
            onQueue[q] = std::move(s);
        } else {
            probed.push_back(std::move(s));
        }
    }
    ASSERT_TRUE(onQueue[0] && onQueue[1]) << "24 sender sockets did not cover both TX queues";
    Checker chk(*eng, flow, {.stride = 2048, .depth = 2048},
                [](uint32_t id) { return sizeVaried(id & 0xffffff); });
    chk.postInitial();
    for (auto& s : onQueue)
        s->flowControl(chk.window(), chk.done(2)); // two senders on one flow
    Counters xdp0 = rig.xdp(), eth0 = rig.rxEthtool();
    uint64_t veth0 = rig.vethDrops();
    onQueue[0]->start();
    onQueue[1]->start();
    chk.pumpUntil(2 * perSender);
    onQueue[0]->join();
    onQueue[1]->join();
    ASSERT_EQ(onQueue[0]->error(), "");
    ASSERT_EQ(onQueue[1]->error(), "");
    const CheckTotals& t = chk.totals();
    EngineStats s = eng->stats();
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_EQ(t.verified, 2 * perSender);
    EXPECT_TRUE(accounted(rig, xdp0, veth0, onQueue[0]->sent() + onQueue[1]->sent(), t, s));
    Counters eth = delta(rig.rxEthtool(), eth0);
    // Per queue: every datagram of its sender exactly once, in send order
    // (one queue is processed in order, so its seqs follow the send order).
    uint64_t perQ[2] = {0, 0}, last[2] = {0, 0};
    bool ordered = true;
    for (uint32_t id : chk.order()) {
        const uint32_t k = id & 0xffffff;
        const int q = (id >> 24) == sid[0] ? 0 : 1;
        ASSERT_EQ(id >> 24, sid[q]) << "datagram from an unknown sender";
        if (perQ[q]++ && k <= last[q])
            ordered = false;
        last[q] = k;
    }
    EXPECT_EQ(perQ[0], perSender);
    EXPECT_EQ(perQ[1], perSender);
    EXPECT_TRUE(ordered) << "one sender's datagrams arrive on one queue and must complete in its order";
    EXPECT_EQ(eth["rx_queue_0_xdp_redirect"], perSender) << describe(eth);
    EXPECT_EQ(eth["rx_queue_1_xdp_redirect"], perSender) << describe(eth);
    if (budget) {
        EXPECT_GT(s.evicted, 0u) << numbers(s);
        EXPECT_GT(s.faultPath, 0u) << numbers(s);
    }
    std::printf("[ numbers  ] two queues, %u pager(s): %s; veth queue0 redirect %llu, queue1 redirect %llu\n",
                pagers, numbers(s).c_str(), (unsigned long long)eth["rx_queue_0_xdp_redirect"],
                (unsigned long long)eth["rx_queue_1_xdp_redirect"]);
}

TEST_F(EngineE2E, TwoQueuesSendersOnBoth) { twoQueues(1, 0); }

TEST_F(EngineE2E, TwoQueuesTwoPagersUnderBudget) { twoQueues(2, 8ull << 20); }

// 5. Every payload size 1 .. 1472 into 1472-byte buffers (all OK), the same
// sweep into buffers of 1, 5, 511, 512, 1000, 1471 bytes (TRUNCATED with the
// first len bytes right whenever the datagram is longer), then a zero-length
// datagram. Buffers at a 3001-byte stride: every alignment, page straddles.
uint32_t sweepSize(uint32_t k) { return k < 2 * 1472 ? k % 1472 + 1 : 0; }
constexpr uint32_t kSweepLens[] = {1, 5, 511, 512, 1000, 1471};
uint32_t sweepLen(uint64_t p) { return p < 1472 ? 1472 : kSweepLens[p % 6]; }

TEST_F(EngineE2E, PayloadSizesAndTruncation)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 64ull << 20});
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = 2 * 1472 + 1;
    Checker chk(*eng, flow, {.stride = 3001, .depth = 1024, .len = sweepLen},
                [](uint32_t id) { return sweepSize(id); }, true);
    chk.postInitial();
    Stream tx(rig, chk, {.count = count, .dstPort = kPort, .size = sweepSize});
    ASSERT_EQ(tx.run(), "");
    const CheckTotals& t = chk.totals();
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_EQ(t.verified, count);
    uint64_t wantTrunc = 0;
    for (uint32_t k = 1472; k < 2 * 1472; k++)
        wantTrunc += sweepSize(k) > sweepLen(k);
    EXPECT_EQ(t.truncated, wantTrunc);
    EXPECT_EQ(t.ok, count - wantTrunc);
    EXPECT_EQ(delta(rig.xdp(), tx.xdpBefore())["truncated"], wantTrunc);
    EXPECT_TRUE(tx.accounted(eng->stats()));
}

// 6. Kernel drops: a UMEM of 64 frames, and a worker that takes every page
// fault itself (FaultPolicy::Block on a cold region: tens of microseconds
// each), cannot keep up with a flat-out burst that has 4096 posted buffers to
// claim, so the kernel drops datagrams XDP already claimed a seq for. Each
// must complete LOST (explained by kernel_rx_dropped) once the rings drained
// and the reorder timeout passed, and the flow must go on: every datagram of
// a stream afterwards completes, OK or LOST for a kernel drop, never stalls.
TEST_F(EngineE2E, KernelDropsCompleteLostAndTheFlowGoesOn)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 64ull << 20,
                         .faultPolicy = FaultPolicy::Block,
                         .frameCount = 64,
                         .rxRingSize = 64});
    Flow& flow = eng->openFlow(kPort);
    Checker chk(*eng, flow, {.stride = 4096, .depth = 4096}, [](uint32_t) { return 1472u; });
    chk.postInitial();
    Counters xdp0 = rig.xdp();
    uint64_t veth0 = rig.vethDrops();
    const Baseline b0 = baseline(rig, *eng);
    const uint32_t burst = 3000, paced = 1000;
    {
        ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 0, .count = burst, .dstPort = kPort, .rate = 0, .size = size1472}),
                  "");
    }
    // Every datagram of the burst is accounted for: each one XDP claimed has
    // completed (OK or LOST), the rest were counted before or in XDP.
    ASSERT_TRUE(chk.pumpUntilSettled(allAccounted(rig, *eng, chk, b0, [&] { return uint64_t(burst); })))
        << "the burst never settled: " << chk.totals().completions << " completions; xdp "
        << describe(delta(rig.xdp(), xdp0));
    const uint64_t okAfterBurst = chk.totals().ok, completionsAfterBurst = chk.totals().completions;
    // The window counts this stream's completions only (the burst's are done).
    const uint64_t base = chk.doneCount();
    Sender tx2(rig.veth(), {.sender = 1, .count = paced, .dstPort = kPort, .size = size1472, .window = chk.window(16),
                            .done = [&chk, base] { return chk.doneCount() - base; }});
    tx2.start();
    const bool all = chk.pumpUntil(completionsAfterBurst + paced);
    tx2.join();
    ASSERT_EQ(tx2.error(), "");
    const CheckTotals& t = chk.totals();
    EngineStats s = eng->stats();
    EXPECT_TRUE(all) << "the flow stalled after the losses: " << t.completions - completionsAfterBurst << " of "
                     << paced << " datagrams completed";
    EXPECT_EQ(t.failures, 0u) << t.firstFailures;
    EXPECT_TRUE(chk.inSendOrder());
    EXPECT_GT(s.kernelRxDropped, 0u) << "the burst should overflow 64 frames behind a faulting worker";
    EXPECT_EQ(t.lost, s.kernelRxDropped) << "every kernel drop is one LOST completion, nothing else";
    EXPECT_EQ(s.rejected, 0u) << "no datagram may arrive after its seq was declared LOST";
    // The flow goes on after the losses: with 16 in flight, 64 frames and an
    // RX ring of 64 suffice, so every datagram of the stream completes OK
    // (each once, in order, byte-exact: checked above).
    const uint64_t okPaced = t.ok - okAfterBurst;
    EXPECT_EQ(okPaced, paced) << "datagrams after the losses must all complete OK";
    uint64_t pacedIds = 0;
    for (uint32_t k = 0; k < paced; k++)
        pacedIds += chk.ids().count(senderId(1, k));
    EXPECT_EQ(pacedIds, okPaced) << "OK completions after the burst must be datagrams of the paced stream";
    EXPECT_TRUE(accounted(rig, xdp0, veth0, burst + paced, t, s));
    // The flow's own accounting attributes every socket drop once: a LOST
    // completion whose datagram never arrived, not a drop before XDP.
    const FlowStats f = flow.stats();
    const uint64_t veth = rig.vethDrops() - veth0, beforeXdp = veth >= s.kernelRxDropped ? veth - s.kernelRxDropped : veth;
    EXPECT_TRUE(flowAccounted(f, t, burst + paced - beforeXdp));
    EXPECT_EQ(f.lostUnarrived, t.lost);
    EXPECT_EQ(f.socketDropped(), s.kernelRxDropped) << "the flow's socket drops are the sockets' own count";
    std::printf("[ numbers  ] kernel drops: burst %u: %llu ok; then %u flow controlled: %llu ok, %llu lost\n", burst,
                (unsigned long long)okAfterBurst, paced, (unsigned long long)okPaced,
                (unsigned long long)(t.completions - completionsAfterBurst - okPaced));
}

// 7. Two flows on one queue: each has its own post ring, sequencer and
// completion ring; interleaved traffic to both ports completes in full, in
// order per flow, and each flow's bytes land in its own buffers.
TEST_F(EngineE2E, TwoFlowsOnOneQueueAreIndependent)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 64ull << 20});
    Flow& a = eng->openFlow(kPort);
    Flow& b = eng->openFlow(kPort + 1);
    ASSERT_NE(a.id(), b.id());
    const uint32_t count = 5000;
    Checker ca(*eng, a, {.base = 0, .stride = 2048, .slots = 8192, .depth = 2048}, [](uint32_t) { return 1000u; });
    Checker cb(*eng, b, {.base = 32ull << 20, .stride = 2048, .slots = 8192, .depth = 2048},
               [](uint32_t) { return 1200u; });
    ca.postInitial();
    cb.postInitial();
    // Both flows share the veth's one queue: two windows of 96 stay below its ring.
    Sender ta(rig.veth(), {.sender = 0, .count = count, .dstPort = kPort, .size = [](uint32_t) { return 1000u; },
                           .window = ca.window(96), .done = ca.done()});
    Sender tb(rig.veth(), {.sender = 1, .count = count, .dstPort = uint16_t(kPort + 1),
                           .size = [](uint32_t) { return 1200u; }, .window = cb.window(96), .done = cb.done()});
    ta.start();
    tb.start();
    // One application thread per flow, as the API has it.
    std::thread other([&] { cb.pumpUntil(count); });
    ca.pumpUntil(count);
    other.join();
    ta.join();
    tb.join();
    ASSERT_EQ(ta.error(), "");
    ASSERT_EQ(tb.error(), "");
    std::printf("[ numbers  ] flow a: %s\n[ numbers  ] flow b: %s\n[ numbers  ] xdp: %s\n",
                describe({{"ok", ca.totals().ok}, {"lost", ca.totals().lost}}).c_str(),
                describe({{"ok", cb.totals().ok}, {"lost", cb.totals().lost}}).c_str(), describe(rig.xdp()).c_str());
    for (Checker* c : {&ca, &cb}) {
        SCOPED_TRACE(c == &ca ? "flow a" : "flow b");
        EXPECT_TRUE(cleanInOrder(*c));
        EXPECT_EQ(c->totals().ok, count);
    }
}

// 8. Jumbo frames: a veth with MTU 9000, every payload size 1 .. 8972 (the
// most an MTU of 9000 carries over IPv4, in an order that mixes them) once,
// into a cold region and into a warm one (populated first), with npf_xdp
// native (a frags program: veth hands it packets above ~3.5 KB in several
// buffers) and in skb mode. The AF_XDP sockets receive those as several
// 4 KiB frames; the worker and the pager gather them. Buffers at a 9001-byte
// stride (every alignment, payloads across up to four pages); every seventh
// is 5000 bytes, so longer datagrams complete TRUNCATED and the checksum
// covers their unplaced tail in later frames. Every byte, the order, the
// UDP checksums (none may fail) and the counters are checked.
constexpr uint32_t kJumboMax = 8972;
uint32_t jumboSize(uint32_t k) { return (k * 5779u) % kJumboMax + 1; } // a permutation of 1 .. 8972
uint32_t jumboLen(uint64_t p) { return p % 7 == 3 ? 5000 : 9216; }

struct JumboCase {
    XdpMode mode;
    bool warm;
    uint32_t prefetch = 256; // 0: nearly every datagram of a cold region takes the fault path
};

class EngineJumbo : public EngineE2E, public ::testing::WithParamInterface<JumboCase> {};

TEST_P(EngineJumbo, EverySizeUpTo8972BitExactInOrder)
{
    const JumboCase jc = GetParam();
    Rig rig({.mtu = 9000});
    EngineInNs eng(rig, {.mode = jc.mode, .regionSize = 96ull << 20, .prefetchDepth = jc.prefetch});
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = kJumboMax;
    Checker chk(*eng, flow, {.stride = 9001, .slots = count, .depth = 1024, .len = jumboLen},
                [](uint32_t id) { return jumboSize(id); }, true);
    if (jc.warm)
        eng->populate(0, eng->regionSize());
    chk.postInitial();
    const EngineStats s0 = eng->stats();
    Stream tx(rig, chk, {.count = count, .dstPort = kPort, .size = jumboSize});
    ASSERT_EQ(tx.run(), "");
    const CheckTotals& t = chk.totals();
    EngineStats s = eng->stats();
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_EQ(t.badCsum, 0u);
    EXPECT_EQ(s.csumErrors, 0u);
    EXPECT_EQ(t.verified, count);
    uint64_t wantTrunc = 0;
    for (uint32_t k = 0; k < count; k++)
        wantTrunc += jumboSize(k) > jumboLen(k);
    EXPECT_EQ(t.truncated, wantTrunc);
    EXPECT_EQ(t.ok, count - wantTrunc);
    EXPECT_TRUE(tx.accounted(s));
    Counters d = delta(rig.xdp(), tx.xdpBefore());
    EXPECT_EQ(d["pass_malformed"] + d["pass_too_big"] + d["pass_fragment"], 0u) << describe(d);
    EXPECT_EQ(d["truncated"], wantTrunc);
    if (jc.warm) {
        EXPECT_EQ(s.faultPath - s0.faultPath, 0u) << "a warm region takes no faults";
        EXPECT_EQ(s.fastPath - s0.fastPath, count);
    } else {
        EXPECT_GT(s.faultPath, 0u) << "a cold region must use the fault path";
        EXPECT_GT(s.packetFaults, 0u);
        EXPECT_EQ(t.faultFlag, s.faultPath);
        if (jc.prefetch == 0) {
            EXPECT_GT(s.faultPath, count / 2) << "without prefetch most datagrams must take the fault path";
        }
    }
    // UMEM sized for the MTU: 4 KiB frames, three per 9000-byte packet.
    EXPECT_EQ(s.pinnedBytes, 3ull * 2 * NPF_POST_RING_SIZE * 4096);
    printNumbers(jc.warm ? "jumbo warm" : jc.prefetch ? "jumbo cold" : "jumbo cold, no prefetch", tx.sender(), s);
}

INSTANTIATE_TEST_SUITE_P(Mtu9000, EngineJumbo,
                         ::testing::Values(JumboCase{XdpMode::Native, false}, JumboCase{XdpMode::Native, true},
                                           JumboCase{XdpMode::Native, false, 0}, JumboCase{XdpMode::Skb, false}),
                         [](const ::testing::TestParamInfo<JumboCase>& i) {
                             return std::string(i.param.mode == XdpMode::Native ? "native" : "skb") +
                                    (i.param.warm ? "_warm" : "_cold") + (i.param.prefetch ? "" : "_no_prefetch");
                         });

} // namespace
} // namespace npf::e2e
