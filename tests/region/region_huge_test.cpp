// Regions of 2 MiB pages (a hugetlbfs memfd, or transparent huge pages with
// a page pool): packet patches and CPU faults install whole huge pages,
// XDP's 4 KiB bitmap gets 512 bits per page, eviction under a budget saves
// and restores them bit-exact. With hugetlbfs the test reserves its huge
// pages (/proc/sys/vm/nr_hugepages) and gives them back.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "huge_pages.h"
#include "region_fixture.h"

namespace npf::test {
using topology::HugePages;
namespace {

constexpr uint64_t kHuge = kHugePageSize;

class RegionHuge : public RegionOn {
protected:
    static RegionConfig hugeConfig(uint64_t size, uint64_t budget = 0)
    {
        RegionConfig c = config(size);
        c.pageSize = kHuge;
        c.residentBudget = budget;
        return c;
    }
    std::optional<HugePages> reserved_;
};
// 2 MiB pages on anonymous memory come from a page pool only (a 2 MiB
// UFFDIO_COPY would install 512 small pages): Anonymous is refused below.
INSTANTIATE_TEST_SUITE_P(Memory, RegionHuge, ::testing::Values(Memory::Memfd, Memory::Pool), memoryName);

TEST(RegionHugeAnonymous, IsRefusedWithAReason)
{
    RegionConfig c = smallConfig(8 * kHuge);
    c.pageSize = kHuge;
    c.backing = RegionBacking::Anonymous;
    try {
        Region r(c);
        FAIL() << "a 2 MiB region on anonymous memory without a pool was built";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EINVAL);
        EXPECT_NE(std::string(e.what()).find("page pool"), std::string::npos) << e.what();
    }
}

// hugetlbfs: n pages reserved for the test; the pool: nothing to reserve.
#define NPF_NEED_HUGE(n)                                \
    do {                                                \
        if (GetParam() == Memory::Memfd) {              \
            reserved_.emplace(n);                       \
            NPF_REQUIRE_HUGE_PAGES(*reserved_);         \
        } else {                                        \
            NPF_REQUIRE_UFFD();                         \
        }                                               \
    } while (0)

// The 4 KiB bits of huge page `page` in the region's bitmap: all set or all clear.
int bitsOf(const Region& r, uint64_t page)
{
    const uint64_t* b = r.residentBitmap();
    int set = 0;
    for (uint64_t w = page * 8; w < page * 8 + 8; ++w)
        set += __builtin_popcountll(b[w]);
    return set;
}

TEST_P(RegionHuge, PatchesAndCpuFaultsInstallWholeHugePages)
{
    NPF_NEED_HUGE(8);
    Region r(hugeConfig(8 * kHuge));
    EXPECT_EQ(r.pages(), 8u);
    EXPECT_EQ(r.pageSize(), kHuge);
    EXPECT_EQ(r.residentBitmapWords(), 8 * 512 / 64u) << "XDP's bitmap stays at 4 KiB granularity";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.base()) % kHuge, 0u);

    // One payload across the boundary of pages 1 and 2, one inside page 5.
    auto a = randomBytes(3000, 1), b = randomBytes(1472, 2);
    Patch ps[] = {{2 * kHuge - 1000, a.data(), 3000}, {5 * kHuge + 12345, b.data(), 1472}};
    int res[2];
    ASSERT_EQ(r.applyPatches(ps, res), 2);
    EXPECT_EQ(r.residentPages(), 3u);
    EXPECT_EQ(r.stats().packetFaults, 3u);
    for (uint64_t p : {1, 2, 5})
        EXPECT_EQ(bitsOf(r, p), 512) << "page " << p;
    for (uint64_t p : {0, 3, 4, 6, 7})
        EXPECT_EQ(bitsOf(r, p), 0) << "page " << p;
    EXPECT_TRUE(r.isResident(kHuge, 2 * kHuge));
    EXPECT_FALSE(r.isResident(3 * kHuge - 1, 2));
    EXPECT_EQ(std::memcmp(r.base() + 2 * kHuge - 1000, a.data(), a.size()), 0);
    EXPECT_EQ(std::memcmp(r.base() + 5 * kHuge + 12345, b.data(), b.size()), 0);
    EXPECT_TRUE(allZero(r.base() + kHuge, kHuge - 1000)) << "the rest of an installed page reads zero";
    EXPECT_TRUE(allZero(r.base() + 5 * kHuge, 12345));

    // Another thread touches page 6 (cold) and writes the last byte of page 7.
    {
        PagerThread pager(r);
        std::thread app([&] {
            EXPECT_TRUE(allZero(r.base() + 6 * kHuge + 4096 * 100, 4096));
            r.base()[8 * kHuge - 1] = 0x5a;
        });
        app.join();
        pager.sync();
    }
    EXPECT_EQ(r.base()[8 * kHuge - 1], 0x5a);
    EXPECT_EQ(r.residentPages(), 5u);
    EXPECT_EQ(r.stats().cpuFaults, 2u);
    EXPECT_EQ(bitsOf(r, 6), 512);

    // A payload to a resident page is copied in place.
    auto c = randomBytes(100, 3);
    Patch pc{6 * kHuge + 7, c.data(), 100};
    ASSERT_EQ(r.applyPatches({&pc, 1}, res), 1);
    EXPECT_EQ(r.stats().patchesToResident, 1u);
    EXPECT_EQ(std::memcmp(r.base() + 6 * kHuge + 7, c.data(), c.size()), 0);
}

TEST_P(RegionHuge, EvictionUnderABudgetRestoresEveryByte)
{
    NPF_NEED_HUGE(6);
    constexpr uint64_t kPages = 16;
    Region r(hugeConfig(kPages * kHuge, 2 * kHuge)); // 16 pages through a budget of 2
    std::vector<std::vector<uint8_t>> content;
    for (uint64_t p = 0; p < kPages; ++p) {
        content.push_back(randomBytes(kHuge, 10 + static_cast<uint32_t>(p)));
        Patch pp{p * kHuge, content.back().data(), static_cast<uint32_t>(kHuge)};
        int res[1];
        ASSERT_EQ(r.applyPatches({&pp, 1}, res), 1) << "page " << p << ": " << res[0];
        EXPECT_LE(r.residentPages(), 3u) << "budget 2 plus one batch";
    }
    RegionStats s = r.stats();
    EXPECT_GE(s.evicted, kPages - 3);
    EXPECT_EQ(s.spilled, s.evicted);
    for (uint64_t p = 0; p < kPages; ++p)
        EXPECT_EQ(bitsOf(r, p) != 0, r.isResident(p * kHuge, kHuge)) << "page " << p;

    // Read everything back through the mapping: evicted pages fault and come
    // back from the spill file, the budget holding all along.
    {
        PagerThread pager(r);
        std::thread app([&] {
            for (uint64_t p = 0; p < kPages; ++p)
                EXPECT_EQ(std::memcmp(r.base() + p * kHuge, content[p].data(), kHuge), 0) << "page " << p;
        });
        app.join();
        pager.sync();
        EXPECT_LE(pager.maxResident(), 3u);
    }
    s = r.stats();
    EXPECT_GE(s.restored, kPages - 3);
    EXPECT_EQ(s.errors, 0u);

    // Released pages come back zeroed, not from the spill file.
    ASSERT_EQ(r.release(0, kPages * kHuge), static_cast<int>(kPages));
    EXPECT_GT(r.evictAll(), 0);
    {
        PagerThread pager(r);
        std::thread app([&] { EXPECT_TRUE(allZero(r.base() + 3 * kHuge, kHuge)); });
        app.join();
    }
}

// Prefetch allocates missing pages with nothing saved before taking the lock
// (Region::preallocate), and restores saved ones under it. Over a range of
// saved, present and never-touched pages, while another thread keeps
// evicting, every page reads what it held: a zeroed page allocated over saved
// content would read zero.
TEST_P(RegionHuge, PrefetchRacingEvictionKeepsSavedContent)
{
    NPF_NEED_HUGE(8);
    constexpr uint64_t kPages = 8;
    RegionConfig cfg = hugeConfig(kPages * kHuge, 4 * kHuge);
    cfg.autoEvict = false; // the evicting thread does it
    Region r(cfg);
    std::vector<std::vector<uint8_t>> content(kPages);
    for (uint64_t p = 0; p < kPages; p += 2) { // odd pages never written
        content[p] = randomBytes(kHuge, 40 + static_cast<uint32_t>(p));
        Patch pp{p * kHuge, content[p].data(), static_cast<uint32_t>(kHuge)};
        int res[1];
        ASSERT_EQ(r.applyPatches({&pp, 1}, res), 1) << "page " << p << ": " << res[0];
    }
    std::atomic<bool> stop{false};
    std::thread evictor([&] {
        while (!stop.load())
            (void)r.evictAll();
    });
    // Until eviction and prefetch have crossed many times (the evicting
    // thread may be scheduled late on a loaded machine: no fixed count).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (r.stats().restored < 40 && std::chrono::steady_clock::now() < deadline) {
        EXPECT_GE(r.prefetch(0, kPages * kHuge), 0);
        std::this_thread::yield();
    }
    stop = true;
    evictor.join();
    ASSERT_GE(r.prefetch(0, kPages * kHuge), 0);
    EXPECT_EQ(r.residentPages(), kPages) << "the last prefetch brought every page in";
    for (uint64_t p = 0; p < kPages; ++p) {
        if (content[p].empty())
            EXPECT_TRUE(allZero(r.base() + p * kHuge, kHuge)) << "page " << p;
        else
            EXPECT_EQ(std::memcmp(r.base() + p * kHuge, content[p].data(), kHuge), 0) << "page " << p;
    }
    const RegionStats s = r.stats();
    EXPECT_GE(s.restored, 40u) << "eviction and prefetch did not cross";
    EXPECT_EQ(s.errors, 0u);
}

// Buffers are released a batch at a time, far smaller than a 2 MiB page: a
// page whose 4 KiB pieces have all been released, over any number of calls,
// is dropped at eviction, not saved; new content in one piece keeps it.
TEST_P(RegionHuge, PiecewiseReleaseDropsAWholePageNewContentKeepsIt)
{
    NPF_NEED_HUGE(4);
    Region r(hugeConfig(4 * kHuge));
    auto a = randomBytes(2 * kHuge, 7);
    Patch pa{0, a.data(), static_cast<uint32_t>(2 * kHuge)};
    int res[1];
    ASSERT_EQ(r.applyPatches({&pa, 1}, res), 1);
    // Page 0 released in 64 KiB steps; page 1 too, but one piece gets a payload afterwards.
    for (uint64_t off = 0; off < 2 * kHuge; off += 64 << 10)
        EXPECT_EQ(r.release(off, 64 << 10), off + (64 << 10) == kHuge || off + (64 << 10) == 2 * kHuge ? 1 : 0)
            << "offset " << off;
    auto b = randomBytes(1000, 8);
    Patch pb{kHuge + 4096 * 3 + 10, b.data(), 1000};
    ASSERT_EQ(r.applyPatches({&pb, 1}, res), 1);
    EXPECT_EQ(r.evictAll(), 2);
    RegionStats s = r.stats();
    EXPECT_EQ(s.discarded, 1u) << "page 0: every piece released";
    EXPECT_EQ(s.spilled, 1u) << "page 1: a piece has new content";
    {
        PagerThread pager(r);
        std::thread app([&] {
            EXPECT_TRUE(allZero(r.base(), kHuge)) << "a released page comes back zeroed";
            std::memcpy(a.data() + kHuge + 4096 * 3 + 10, b.data(), b.size());
            EXPECT_EQ(std::memcmp(r.base() + kHuge, a.data() + kHuge, kHuge), 0) << "page 1 saved whole";
        });
        app.join();
    }
}

RegionConfig hugetlbConfig(uint64_t size)
{
    RegionConfig c = smallConfig(size);
    c.pageSize = kHuge;
    return c;
}

TEST(RegionHugeConfig, BadConfigsSayWhatIsWrong)
{
    NPF_REQUIRE_UFFD();
    auto message = [](RegionConfig c) {
        try {
            Region r(c);
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    RegionConfig odd = smallConfig(8 * kHuge);
    odd.pageSize = 8192;
    EXPECT_NE(message(odd).find("must be 4096 or 2 MiB"), std::string::npos) << message(odd);
    EXPECT_NE(message(hugetlbConfig(kHuge + 4096)).find("multiple of 2 MiB"), std::string::npos);
    // A 64 GiB region without a budget may hold 32768 huge pages at once: no
    // test machine has them free, and the error says how to reserve them.
    const std::string none = message(hugetlbConfig(64ull << 30));
    EXPECT_NE(none.find("/proc/sys/vm/nr_hugepages"), std::string::npos) << none;
}

} // namespace
} // namespace npf::test
