// A region on private anonymous memory with a page pool (PagePool): installs
// move pool pages in, evictions move them back, and under steady eviction
// and installation no page is allocated or freed (pool_empty and pool_full
// stay 0); a pool too small for an eviction frees the rest; everything
// reads back byte for byte. 4 KiB pages and 2 MiB transparent huge pages.
#include <cstdio>
#include <cstring>
#include <thread>

#include "huge_pages.h"
#include "region/uffd.h"
#include "region_fixture.h"

namespace npf::test {
namespace {

class RegionPool : public ::testing::TestWithParam<uint64_t> {
protected:
    void SetUp() override
    {
        NPF_REQUIRE_UFFD();
        if (!userfaultfdHasMove())
            GTEST_SKIP() << "no UFFDIO_MOVE in this kernel (Linux 6.8)";
    }
    uint64_t pg() const { return GetParam(); }
    RegionConfig config(uint64_t pages, uint64_t budgetPages) const
    {
        RegionConfig c = smallConfig(pages * pg());
        c.pageSize = pg();
        c.residentBudget = budgetPages * pg();
        c.backing = RegionBacking::Pool;
        c.maxBatchPages = 16;
        return c;
    }
};
INSTANTIATE_TEST_SUITE_P(PageSize, RegionPool, ::testing::Values(kPg, kHugePageSize),
                         [](const auto& i) { return i.param == kPg ? "4KiB" : "2MiB"; });

// Writes pages [first, last) once, page by page.
void writePages(Region& r, const std::vector<uint8_t>& content, uint64_t first, uint64_t last)
{
    for (uint64_t p = first; p < last; ++p) {
        Patch pp{p * r.pageSize(), &content[p * r.pageSize()], static_cast<uint32_t>(r.pageSize())};
        int res[1];
        EXPECT_EQ(r.applyPatches({&pp, 1}, res), 1) << "page " << p << ": " << res[0];
    }
}

std::vector<uint8_t> writeAll(Region& r)
{
    auto content = randomBytes(r.size(), 7);
    writePages(r, content, 0, r.pages());
    return content;
}

// A budget far below the region, every page written once: until the budget
// is reached the region grows (pool pages first, then fresh ones); from then
// on each install takes a pool page and each eviction gives one back.
TEST_P(RegionPool, SteadyChurnNeitherAllocatesNorFreesAndKeepsEveryByte)
{
    const uint64_t pages = pg() == kPg ? 1024 : 16, budget = pages / 8;
    Region r(config(pages, budget));
    ASSERT_GT(r.poolCapacity(), 0u);
    ASSERT_EQ(r.poolPages(), r.poolCapacity()) << "the pool is warmed up when the region is built";
    auto content = randomBytes(r.size(), 7);
    writePages(r, content, 0, 2 * budget);
    const RegionStats warm = r.stats();
    const uint64_t held = r.poolPages() + r.residentPages(); // the pages this region owns
    EXPECT_GE(held, r.poolCapacity());
    writePages(r, content, 2 * budget, pages);
    RegionStats s = r.stats();
    EXPECT_EQ(s.pagesInstalled, pages);
    EXPECT_EQ(s.poolEmpty, warm.poolEmpty) << "no fresh page once the budget was reached";
    EXPECT_EQ(s.poolFull, 0u) << "no page freed";
    EXPECT_EQ(s.poolInstalls - warm.poolInstalls, pages - 2 * budget) << "every later install moved a pool page in";
    EXPECT_EQ(s.poolReturns, s.evicted) << "every evicted page went back to the pool";
    EXPECT_GE(s.evicted, pages - budget - r.geometry().batchPages);
    EXPECT_EQ(s.errors, 0u);
    EXPECT_EQ(r.poolPages() + r.residentPages(), held) << "no page allocated, none freed";

    // Read back through the mapping: evicted pages fault and come back from
    // the spill file, in pool pages.
    {
        PagerThread pager(r);
        std::thread app([&] { EXPECT_EQ(std::memcmp(r.base(), content.data(), content.size()), 0); });
        app.join();
        pager.sync();
    }
    if (pg() == kHugePageSize) // THP depends on the kernel finding free 2 MiB blocks: shown, not asserted
        std::printf("[ thp    ] region resident %llu pages, AnonHugePages %lld KiB\n",
                    static_cast<unsigned long long>(r.residentPages()),
                    static_cast<long long>(topology::anonHugeKiB(r.base())));
    s = r.stats();
    EXPECT_EQ(s.poolEmpty, warm.poolEmpty);
    EXPECT_EQ(s.poolFull, 0u);
    EXPECT_EQ(s.errors, 0u);
    EXPECT_EQ(r.poolPages() + r.residentPages(), held);
}

// More resident than the pool holds: the installs after the pool runs dry
// refill it with fresh pages, the eviction frees what it cannot pool, and
// the accounting says so; content survives both.
TEST_P(RegionPool, OverflowAndDrainAreCountedAndCorrect)
{
    RegionConfig c = config(pg() == kPg ? 1024 : 16, 0);
    c.poolBatches = 1;
    Region r(c);
    const uint64_t cap = r.poolCapacity();
    ASSERT_LT(cap * 2, r.pages());
    auto content = writeAll(r); // no budget: the pool runs dry, and is refilled with fresh pages
    RegionStats s = r.stats();
    EXPECT_EQ(s.poolInstalls, r.pages()) << "every page went in through the pool";
    EXPECT_EQ(s.copyCalls, 0u);
    EXPECT_EQ(s.poolEmpty, r.pages() - cap);
    EXPECT_EQ(r.poolPages(), 0u);
    ASSERT_EQ(r.evictAll(), static_cast<int>(r.pages()));
    s = r.stats();
    EXPECT_EQ(s.poolReturns, cap);
    EXPECT_EQ(s.poolFull, r.pages() - cap);
    EXPECT_EQ(r.poolPages(), cap);
    EXPECT_EQ(heldBytes(r), 0u) << "evicted pages left the region";
    {
        PagerThread pager(r);
        std::thread app([&] { EXPECT_EQ(std::memcmp(r.base(), content.data(), content.size()), 0); });
        app.join();
        pager.sync();
    }
    EXPECT_EQ(r.stats().errors, 0u);
}

// Released pages leave through the pool too, and come back zeroed: a pool
// page's old content never shows.
TEST_P(RegionPool, RecycledPagesNeverShowTheirOldContent)
{
    Region r(config(pg() == kPg ? 256 : 8, 0));
    auto content = writeAll(r);
    ASSERT_EQ(r.release(0, r.size()), static_cast<int>(r.pages()));
    ASSERT_EQ(r.evictAll(), static_cast<int>(r.pages()));
    EXPECT_EQ(r.stats().discarded, r.pages());
    ASSERT_EQ(r.poolPages(), r.poolCapacity());
    const uint64_t before = r.stats().poolInstalls;
    PagerThread pager(r);
    std::thread app([&] {
        EXPECT_TRUE(allZero(r.base(), r.size())) << "a released page comes back zeroed";
        r.base()[r.size() - 1] = 0x5a;
    });
    app.join();
    pager.sync();
    EXPECT_EQ(r.base()[r.size() - 1], 0x5a);
    EXPECT_EQ(r.stats().poolInstalls, before + r.pages())
        << "every page came from the pool, the first ones full of old content";
}

// A datagram that lands on a page from the pool: the page holds that
// datagram and zeros, never a byte of what the pool page held before (the
// pager zeroes only around a lone payload).
TEST_P(RegionPool, APayloadOnARecycledPageComesWithZerosAround)
{
    Region r(config(pg() == kPg ? 64 : 4, 0));
    writeAll(r);
    ASSERT_EQ(r.release(0, r.size()), static_cast<int>(r.pages()));
    ASSERT_EQ(r.evictAll(), static_cast<int>(r.pages()));
    ASSERT_EQ(r.poolPages(), r.poolCapacity());
    const uint64_t before = r.stats().poolInstalls;
    // One payload a page, at an offset that moves from page to page (the
    // first at 0, the last reaching the page's end), and one page with two.
    const auto payload = randomBytes(1472, 9);
    std::vector<Patch> ps;
    std::vector<std::pair<uint64_t, uint32_t>> placed;
    for (uint64_t p = 0; p < r.pages(); ++p) {
        const uint64_t off = p == 0 ? 0 : p == r.pages() - 1 ? pg() - 1472 : (p * 997) % (pg() - 1472);
        ps.push_back({p * pg() + off, payload.data(), 1472});
        placed.push_back({p * pg() + off, 1472});
    }
    ps.push_back({pg() + pg() / 2, payload.data(), 100}); // page 1's second piece
    placed.push_back({pg() + pg() / 2, 100});
    std::vector<int> res(ps.size(), 1);
    ASSERT_EQ(r.applyPatches(ps, res), static_cast<int>(ps.size()));
    EXPECT_GT(r.stats().poolInstalls, before) << "the pages came from the pool, with their old content";
    std::vector<uint8_t> want(r.size(), 0);
    for (size_t i = 0; i < ps.size(); ++i)
        std::memcpy(want.data() + placed[i].first, ps[i].data, placed[i].second);
    for (uint64_t p = 0; p < r.pages(); ++p)
        EXPECT_EQ(std::memcmp(r.base() + p * pg(), want.data() + p * pg(), pg()), 0) << "page " << p;
}

} // namespace
} // namespace npf::test

namespace npf::test {
namespace {

// A reserve (RegionConfig::reservePages) fills the pool when the region is
// built: a cold region's first installs, as many as the reserve, take no
// fresh page; the pool then refills as before. Contents byte for byte.
TEST_P(RegionPool, AReserveIsInThePoolBeforeTheFirstInstall)
{
    const uint64_t pages = pg() == kPg ? 512 : 8, reserve = pages / 2;
    RegionConfig c = config(pages, 0);
    c.reservePages = reserve;
    Region r(c);
    ASSERT_EQ(r.poolCapacity(), std::max<uint64_t>(reserve, 4 * r.geometry().batchPages));
    ASSERT_EQ(r.poolPages(), r.poolCapacity()) << "faulted in when the region is built";
    auto content = randomBytes(r.size(), 11);
    writePages(r, content, 0, reserve);
    RegionStats s = r.stats();
    EXPECT_EQ(s.poolInstalls, reserve);
    EXPECT_EQ(s.poolEmpty, 0u) << "the reserve's installs took no fresh page";
    EXPECT_EQ(s.reserveFreed, 0u) << "a pool's reserve stays in the pool";
    writePages(r, content, reserve, pages);
    s = r.stats();
    EXPECT_EQ(s.pagesInstalled, pages);
    EXPECT_GT(s.poolEmpty, 0u) << "past the reserve, fresh pages";
    EXPECT_EQ(s.errors, 0u);
    std::thread app([&] { EXPECT_EQ(std::memcmp(r.base(), content.data(), content.size()), 0); });
    app.join();
}

// The copy route's reserve (PageReserve): freed kFreeAhead pages at a time
// (reserve_freed), just before the copies that take as many, until it is
// used up; then installs go on taking pages from the kernel.
TEST(RegionReserve, TheCopyRouteFreesItsReserveAheadOfItsCopies)
{
    NPF_REQUIRE_UFFD();
    constexpr uint64_t kAhead = PageReserve::kFreeAhead;
    const uint64_t pages = 4 * kAhead, reserve = 2 * kAhead + kAhead / 2;
    RegionConfig c = smallConfig(pages * kPg);
    c.backing = RegionBacking::Anonymous;
    c.reservePages = reserve;
    c.maxBatchPages = 16;
    Region r(c);
    EXPECT_STREQ(r.route(), "anon-4k");
    auto content = randomBytes(r.size(), 13);
    writePages(r, content, 0, 10);
    EXPECT_EQ(r.stats().reserveFreed, kAhead) << "the first copy freed a run ahead";
    writePages(r, content, 10, kAhead);
    EXPECT_EQ(r.stats().reserveFreed, kAhead) << "the copies took what was freed ahead";
    writePages(r, content, kAhead, kAhead + 1);
    EXPECT_EQ(r.stats().reserveFreed, 2 * kAhead) << "the next copy freed the next run";
    writePages(r, content, kAhead + 1, pages);
    const RegionStats s = r.stats();
    EXPECT_EQ(s.reserveFreed, reserve) << "used up once, never more";
    EXPECT_EQ(s.pagesInstalled, pages);
    EXPECT_EQ(s.poolInstalls, 0u);
    EXPECT_EQ(s.errors, 0u);
    std::thread app([&] { EXPECT_EQ(std::memcmp(r.base(), content.data(), content.size()), 0); });
    app.join();
}

} // namespace
} // namespace npf::test
