// CPU faults served from the uffd, prefetch, the 64 GiB virtual region, and
// rough rates (printed, not asserted).
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>

#include "sys/latency_histogram.h"
#include "region_fixture.h"

namespace npf::test {
namespace {

class RegionFault : public RegionOn {};
NPF_ON_EACH_MEMORY(RegionFault);

uint64_t rssBytes()
{
    std::ifstream f("/proc/self/statm");
    uint64_t size = 0, rss = 0;
    f >> size >> rss;
    return rss * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Blocks until the uffd has a pending event (a thread is faulting).
bool waitForFault(const Region& r, int ms = 2000)
{
    pollfd p{r.uffdFd(), POLLIN, 0};
    return ::poll(&p, 1, ms) == 1;
}

TEST_P(RegionFault, ColdPageTouchedByAnotherThreadReadsZero)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    PagerThread pager(r);
    std::thread app([&] {
        const volatile uint8_t* p = r.base() + 7 * kPg + 123;
        EXPECT_EQ(*p, 0);
        EXPECT_TRUE(allZero(r.base() + 7 * kPg, kPg));
    });
    app.join();
    pager.sync();
    RegionStats s = r.stats();
    EXPECT_EQ(s.cpuFaults, 1u);
    EXPECT_EQ(s.pagesInstalled, 1u);
    EXPECT_EQ(s.residentPages, 1u);
    EXPECT_TRUE(r.isResident(7 * kPg, kPg));
    EXPECT_FALSE(r.isResident(6 * kPg, kPg));
    EXPECT_EQ(heldBytes(r), kPg);
}

TEST_P(RegionFault, WriteFaultKeepsTheWrite)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    PagerThread pager(r);
    std::thread app([&] { std::memset(r.base() + 9 * kPg + 5, 0x77, 2 * kPg); });
    app.join();
    pager.sync();
    EXPECT_EQ(r.stats().cpuFaults, 3u);
    EXPECT_EQ(r.base()[9 * kPg + 4], 0);
    EXPECT_EQ(r.base()[9 * kPg + 5], 0x77);
    EXPECT_EQ(r.base()[11 * kPg + 4], 0x77);
    EXPECT_EQ(r.base()[11 * kPg + 5], 0);
}

// A packet patch resolves a CPU fault that is still pending: UFFDIO_COPY
// wakes the faulting thread, which sees the payload.
TEST_P(RegionFault, PacketPatchResolvesPendingCpuFault)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    auto payload = randomBytes(1000, 5);
    auto reader = std::async(std::launch::async, [&] {
        std::vector<uint8_t> got(1000);
        std::memcpy(got.data(), r.base() + 4 * kPg + 50, 1000);
        return got;
    });
    ASSERT_TRUE(waitForFault(r)) << "the reader never faulted";
    Patch ps[] = {{4 * kPg + 50, payload.data(), 1000}};
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    ASSERT_EQ(reader.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_EQ(reader.get(), payload);
    // The pending event went away with the wake; nothing left to serve.
    EXPECT_EQ(r.serviceFaults(), 0);
    EXPECT_EQ(r.stats().cpuFaults, 0u);
    EXPECT_EQ(r.stats().packetFaults, 1u);
}

// The CPU side of EEXIST: a fault is pending while the page appears through
// another mapping; serving it meets EEXIST and must still wake the thread.
TEST(RegionFaultMemfd, CpuFaultOnPageThatAppearedMeanwhileIsWoken)
{
    NPF_REQUIRE_UFFD();
    Region r(smallConfig());
    void* alias = ::mmap(nullptr, r.size(), PROT_READ | PROT_WRITE, MAP_SHARED, r.memfd(), 0);
    ASSERT_NE(alias, MAP_FAILED);
    auto reader = std::async(std::launch::async, [&] { return *(volatile uint8_t*)(r.base() + 6 * kPg + 9); });
    ASSERT_TRUE(waitForFault(r));
    static_cast<uint8_t*>(alias)[6 * kPg + 9] = 0x42;
    EXPECT_EQ(r.serviceFaults(), 1);
    ASSERT_EQ(reader.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_EQ(reader.get(), 0x42);
    EXPECT_EQ(r.stats().eexist, 1u);
    EXPECT_TRUE(r.isResident(6 * kPg, kPg));
    ::munmap(alias, r.size());
}

TEST_P(RegionFault, PrefetchInstallsMissingPagesOnce)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    auto p = randomBytes(16, 2);
    Patch ps[] = {{12 * kPg, p.data(), 16}};
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    EXPECT_EQ(r.prefetch(10 * kPg + 1, 5 * kPg), 5); // pages 10..15 minus 12
    EXPECT_EQ(r.prefetch(10 * kPg, 6 * kPg), 0);
    EXPECT_EQ(r.stats().prefetched, 5u);
    EXPECT_TRUE(r.isResident(10 * kPg, 6 * kPg));
    EXPECT_TRUE(allZero(r.base() + 10 * kPg, 2 * kPg));
    EXPECT_EQ(std::memcmp(r.base() + 12 * kPg, p.data(), 16), 0);
    EXPECT_EQ(r.prefetch(r.size(), 1), -EINVAL);
    EXPECT_EQ(r.stats().cpuFaults, 0u);
}

TEST_P(RegionFault, SixtyFourGiBVirtualCostsOnlyTouchedPages)
{
    NPF_REQUIRE_UFFD();
    uint64_t before = rssBytes();
    RegionConfig c = config(64ull << 30);
    Region r(c);
    EXPECT_EQ(r.pages(), 16ull << 20);
    auto p = randomBytes(1472, 9);
    std::vector<Patch> ps;
    for (uint64_t i = 0; i < 1000; ++i)
        ps.push_back({(i * 16777ull % r.pages()) * kPg + 100, p.data(), 1472});
    std::vector<int> res(ps.size());
    ASSERT_EQ(r.applyPatches(ps, res), 1000);
    ASSERT_EQ(r.prefetch(r.size() - 64 * kPg, 64 * kPg), 64);
    {
        PagerThread pager(r);
        EXPECT_EQ(r.base()[(40ull << 30) + 7], 0);
    }
    uint64_t grew = rssBytes() - before;
    EXPECT_EQ(heldBytes(r), (1000 + 64 + 1) * kPg);
    EXPECT_LT(grew, 64ull << 20) << "RSS grew by " << grew;
    for (const Patch& q : ps)
        ASSERT_EQ(std::memcmp(r.base() + q.offset, p.data(), 1472), 0);
    EXPECT_EQ(r.evictAll(), 1065);
    EXPECT_EQ(heldBytes(r), 0u);
    std::printf("[ rates  ] 64 GiB region: RSS grew %.1f MiB for 1065 pages\n", double(grew) / (1 << 20));
}

// Rough rates for the report; asserts only that the work happened.
TEST(RegionFaultMemfd, RoughRates)
{
    NPF_REQUIRE_UFFD();
    Region r(smallConfig(512ull << 20));
    constexpr uint64_t kN = 32768;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(r.prefetch(0, kN * kPg), static_cast<int>(kN));
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ rates  ] prefetch (UFFDIO_COPY, 64 pages/call): %.2f M pages/s\n", kN / sec / 1e6);

    t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(r.evictAll(), static_cast<int>(kN));
    sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ rates  ] evictAll (wp, save, punch): %.2f M pages/s\n", kN / sec / 1e6);

    // Packet patches: one 1472-byte payload per page, 256 pages per batch.
    auto p = randomBytes(1472, 4);
    std::vector<Patch> ps(256);
    std::vector<int> res(256);
    LatencyHistogram batchNs;
    t0 = std::chrono::steady_clock::now();
    for (uint64_t b = 0; b < kN / 256; ++b) {
        for (uint64_t i = 0; i < 256; ++i)
            ps[i] = {(kN + b * 256 + i) * kPg + 64, p.data(), 1472};
        BatchTiming t;
        ASSERT_EQ(r.applyPatches(ps, res, &t), 256);
        batchNs.record(t.end - t.start);
    }
    sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ rates  ] packet patches to cold pages: %.2f M pages/s (batch of 256: %s ns)\n",
                kN / sec / 1e6, batchNs.summary().c_str());

    // CPU faults: a thread touches cold pages one by one, pager on another thread.
    ASSERT_GT(r.evictAll(), 0);
    LatencyHistogram faultNs;
    {
        PagerThread pager(r);
        std::thread app([&] {
            for (uint64_t i = 0; i < 4000; ++i) {
                auto a = std::chrono::steady_clock::now();
                (void)*(volatile uint8_t*)(r.base() + (2 * kN + i) * kPg);
                faultNs.record(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                            std::chrono::steady_clock::now() - a)
                                            .count()));
            }
        });
        app.join();
    }
    EXPECT_EQ(r.stats().cpuFaults, 4000u);
    std::printf("[ rates  ] CPU fault served cross-thread (poll + serviceFaults): %s ns\n",
                faultNs.summary().c_str());
}

} // namespace
} // namespace npf::test
