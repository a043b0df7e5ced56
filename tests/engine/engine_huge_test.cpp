// npf::Engine with a region of 2 MiB pages (hugetlbfs): a cold region and a
// budget far below the data, end to end on the veth pair; every byte checked,
// in order, every datagram accounted for. The test reserves its huge pages
// (/proc/sys/vm/nr_hugepages) and gives them back.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "engine_fixture.h"
#include "huge_pages.h"

namespace npf::e2e {
namespace {

constexpr uint16_t kPort = 7150;
constexpr uint64_t kHuge = 2ull << 20;
using namespace std::chrono_literals;

uint32_t sizeVaried(uint32_t k) { return 1472 - (k * 37) % 600; }
uint32_t size1472(uint32_t) { return 1472; }

#define NPF_REQUIRE_HUGE_PAGES(pool)                                          \
    do {                                                                      \
        if (!(pool).ok())                                                     \
            GTEST_SKIP() << "2 MiB huge pages unavailable: " << (pool).why(); \
    } while (0)

// A cold region of 32 huge pages: the first datagram into each page takes the
// fault path and installs all 2 MiB of it; nothing lost, bit-exact, in order.
TEST_F(EngineE2E, HugePagesColdRegionNothingLostBitExactInOrder)
{
    topology::HugePages pool(33);
    NPF_REQUIRE_HUGE_PAGES(pool);
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 64ull << 20, .pageSize = kHuge});
    ASSERT_EQ(eng->stats().residentPages, 0u) << "region must start cold";
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = 20000;
    Checker chk(*eng, flow, {.stride = 1500, .depth = 4096, .len = [](uint64_t) { return 1472u; }},
                [](uint32_t id) { return sizeVaried(id); });
    chk.postInitial();
    ASSERT_EQ(eng->stats().residentPages, 0u) << "posting must not populate";
    Counters xdp0 = rig.xdp();
    uint64_t veth0 = rig.vethDrops();
    Sender tx(rig.veth(), {.count = count, .dstPort = kPort, .size = sizeVaried, .window = chk.window(),
                           .done = chk.done()});
    tx.start();
    chk.pumpUntil(count);
    tx.join();
    ASSERT_EQ(tx.error(), "");
    const CheckTotals& t = chk.totals();
    EngineStats s = eng->stats();
    EXPECT_EQ(t.failures, 0u) << t.firstFailures;
    EXPECT_EQ(t.lost, 0u);
    EXPECT_TRUE(chk.inSendOrder());
    EXPECT_EQ(t.ok, count);
    EXPECT_EQ(t.verified, count);
    EXPECT_TRUE(accounted(rig, xdp0, veth0, tx.sent(), t, s));
    EXPECT_GT(s.faultPath, 0u) << "a cold region must use the fault path";
    EXPECT_EQ(t.faultFlag, s.faultPath);
    EXPECT_EQ(s.fastPath + s.faultPath, count);
    // 20000 x 1500 B = 29 MiB of buffers: 15 huge pages, each installed once.
    EXPECT_LE(s.packetFaults + s.prefetched + s.cpuFaults, 32u) << "pages are 2 MiB: " << numbers(s);
    EXPECT_EQ(s.residentPages % 512, 0u) << "resident_pages counts 4 KiB pages, 512 per huge page";
    std::printf("[ numbers  ] huge cold: %s\n", numbers(s).c_str());
}

// Budget 8 MiB (4 huge pages) for 17.5 MiB of data in a 64 MiB region: all
// of it verified after the traffic (restored from the spill), residency
// within the budget plus one page.
TEST_F(EngineE2E, HugePagesBudgetFarBelowDataStaysWithinBudget)
{
    topology::HugePages pool(6);
    NPF_REQUIRE_HUGE_PAGES(pool);
    Rig rig;
    const uint64_t budget = 4 * kHuge;
    EngineInNs eng(rig, {.regionSize = 64ull << 20, .residentBudget = budget, .pageSize = kHuge});
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = 12500; // x 1472 B = 17.5 MiB
    // 256 posted buffers of 2048 B = 512 KiB: one huge page protected at a time, two at a border.
    Checker chk(*eng, flow, {.stride = 2048, .depth = 256}, size1472);
    chk.postInitial();
    std::atomic<bool> done{false};
    std::atomic<uint64_t> maxResident{0};
    std::thread sampler([&] {
        while (!done.load()) {
            maxResident = std::max<uint64_t>(maxResident.load(), eng->stats().residentPages);
            std::this_thread::sleep_for(1ms);
        }
    });
    Counters xdp0 = rig.xdp();
    uint64_t veth0 = rig.vethDrops();
    Sender tx(rig.veth(), {.count = count, .dstPort = kPort, .size = size1472, .window = chk.window(),
                           .done = chk.done()});
    tx.start();
    chk.pumpUntil(count, count);
    tx.join();
    chk.verifyPending();
    done = true;
    sampler.join();
    ASSERT_EQ(tx.error(), "");
    const CheckTotals& t = chk.totals();
    EngineStats s = eng->stats();
    EXPECT_EQ(t.failures, 0u) << t.firstFailures;
    EXPECT_EQ(t.lost, 0u);
    EXPECT_TRUE(chk.inSendOrder());
    EXPECT_EQ(t.verified, count);
    EXPECT_TRUE(accounted(rig, xdp0, veth0, tx.sent(), t, s));
    EXPECT_LE(maxResident.load(), (budget / kHuge + 1) * 512) << "in 4 KiB pages: budget plus one huge page";
    EXPECT_GT(s.evicted, 0u);
    EXPECT_GT(s.restored, 0u);
    std::printf("[ numbers  ] huge budget: peak %llu KiB resident; %s\n",
                (unsigned long long)maxResident.load() * 4, numbers(s).c_str());
}

} // namespace
} // namespace npf::e2e
