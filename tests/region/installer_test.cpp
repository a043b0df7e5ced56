// The two install primitives on their own, over a real userfaultfd-registered
// memfd mapping without a Region around them: CopyInstaller (images built in
// staging, UFFDIO_COPY per run, EEXIST, saved content, spill errors) and
// ContinueInstaller (2 MiB pages: fallocate + alias + UFFDIO_CONTINUE); and
// the bounded EAGAIN backoff both use.
#include <fcntl.h>

#include <cstring>

#include "huge_pages.h"
#include "page_target.h"
#include "region/backoff.h"
#include "region/continue_installer.h"
#include "region/copy_installer.h"

namespace npf::test {
using topology::HugePages;
namespace {

struct CopyTarget : PageTarget {
    explicit CopyTarget(uint32_t batchPages, uint64_t pages = 64) : PageTarget(pages, NPF_PAGE_SHIFT, batchPages) {}
    CopyInstaller installer{RegionParts{uffd, io, state, spill, planned, c, name}, staging, noPool, noReserve, batch};
};

TEST(CopyInstaller, CopiesOneRunOfConsecutivePagesPerIoctl)
{
    NPF_REQUIRE_UFFD();
    CopyTarget t(4);
    BatchTiming tm{};
    // Runs of at most 4 (the batch): 1-4, 5-7, then 9 on its own.
    t.installer.install(t.bare({1, 2, 3, 4, 5, 6, 7, 9}), &tm);
    for (int s : t.status)
        EXPECT_EQ(s, 0);
    EXPECT_EQ(t.c.get<&RegionStats::copyCalls>(), 3u) << "1-4, 5-7, 9";
    EXPECT_EQ(tm.copies, 3u);
    EXPECT_EQ(tm.pages, 8u);
    EXPECT_EQ(t.c.get<&RegionStats::pagesInstalled>(), 8u);
    EXPECT_NE(tm.imageReady, 0u);
    EXPECT_NE(tm.copyDone, 0u);
    EXPECT_EQ(t.state.residentPages(), 8u);
    EXPECT_TRUE(t.state.isResident(kPg, 7 * kPg));
    EXPECT_FALSE(t.state.isResident(8 * kPg, 1));
    EXPECT_TRUE(allZero(t.at(1), 7 * kPg)) << "installed pages read zero, without a fault";
    EXPECT_EQ(t.c.get<&RegionStats::errors>(), 0u);
}

TEST(CopyInstaller, ImagesCarrySavedContentAndEveryPayload)
{
    NPF_REQUIRE_UFFD();
    CopyTarget t(64);
    auto old = randomBytes(kPg, 1), p = randomBytes(3000, 2);
    t.save(11, old);
    // A payload across pages 10 and 11 (11 has saved content), a later one
    // overlapping it, one into page 20.
    Patch ps[] = {{11 * kPg - 1000, p.data(), 3000}, {11 * kPg + 100, p.data(), 10}, {20 * kPg + 5, p.data(), 1}};
    t.plan(ps);
    ASSERT_EQ(t.pages, (std::vector<uint64_t>{10, 11, 20}));
    const uint64_t spilled = t.spillBytes();
    ASSERT_GE(spilled, kPg);
    t.installer.install(t.withPieces(), nullptr);
    EXPECT_EQ(t.status, (std::vector<int>{0, 0, 0}));

    std::vector<uint8_t> want10(kPg, 0), want11 = old;
    std::memcpy(&want10[kPg - 1000], p.data(), 1000);
    std::memcpy(&want11[0], p.data() + 1000, 2000);
    std::memcpy(&want11[100], p.data(), 10);
    EXPECT_EQ(std::memcmp(t.at(10), want10.data(), kPg), 0);
    EXPECT_EQ(std::memcmp(t.at(11), want11.data(), kPg), 0) << "saved content under the payloads, later wins";
    EXPECT_EQ(t.at(20)[5], p[0]);
    EXPECT_EQ(t.c.get<&RegionStats::restored>(), 1u);
    EXPECT_FALSE(t.state.saved(11));
    EXPECT_EQ(t.spillBytes(), spilled - kPg) << "the saved copy is dropped";
    EXPECT_EQ(t.c.get<&RegionStats::copyCalls>(), 2u) << "10-11, 20";
}

// A page made present through the unregistered alias (a CPU fault the uffd
// never sees) meets EEXIST mid-run: kept, patched in place, installed around.
TEST(CopyInstaller, PagePresentBehindItsBackIsPatchedInPlace)
{
    NPF_REQUIRE_UFFD();
    CopyTarget t(64);
    std::memset(t.alias.as<uint8_t>() + 3 * kPg, 0x5a, kPg);
    auto p = randomBytes(300, 3);
    Patch ps[] = {{2 * kPg, p.data(), 8}, {3 * kPg + 100, p.data(), 200}, {4 * kPg, p.data(), 16}};
    t.plan(ps);
    t.installer.install(t.withPieces(), nullptr);
    EXPECT_EQ(t.status, (std::vector<int>{0, 0, 0}));
    EXPECT_EQ(t.c.get<&RegionStats::eexist>(), 1u);
    EXPECT_EQ(t.c.get<&RegionStats::pagesInstalled>(), 2u) << "EEXIST is not an install";
    EXPECT_EQ(t.state.residentPages(), 3u);
    EXPECT_EQ(std::memcmp(t.at(3) + 100, p.data(), 200), 0);
    EXPECT_EQ(t.at(3)[99], 0x5a);
    EXPECT_EQ(t.at(3)[300], 0x5a);
    EXPECT_EQ(std::memcmp(t.at(4), p.data(), 16), 0);
}

TEST(CopyInstaller, UnreadableSavedContentFailsItsRunOnly)
{
    NPF_REQUIRE_UFFD();
    CopyTarget t(2);
    // The spill file through a write-only descriptor: every load fails.
    t.save(5, randomBytes(kPg, 4));
    const std::string path = "/proc/self/fd/" + std::to_string(t.spill.fd());
    Fd wronly(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(wronly);
    t.spill = SpillFile::own(std::move(wronly));
    t.installer.install(t.bare({4, 5, 6}), nullptr);
    EXPECT_EQ(t.status, (std::vector<int>{-EBADF, -EBADF, 0})) << "runs 4-5 and 6";
    EXPECT_EQ(t.c.get<&RegionStats::errors>(), 1u);
    EXPECT_FALSE(t.state.present(5));
    EXPECT_TRUE(t.state.saved(5)) << "still saved: a later install tries again";
    EXPECT_EQ(t.state.residentPages(), 1u);
}

struct HugeTarget : PageTarget {
    explicit HugeTarget(uint64_t pages) : PageTarget(pages, 21, 1) {}
    ContinueInstaller installer{RegionParts{uffd, io, state, spill, planned, c, name}, alias};
};

TEST(ContinueInstaller, MapsZeroedHugePagesWithTheirPayloads)
{
    HugePages pool(3);
    NPF_REQUIRE_HUGE_PAGES(pool);
    HugeTarget t(4);
    auto p = randomBytes(5000, 5);
    Patch ps[] = {{kHugePageSize - 1000, p.data(), 5000}};
    t.plan(ps);
    BatchTiming tm{};
    t.installer.install(t.withPieces(), &tm);
    EXPECT_EQ(t.status, (std::vector<int>{0, 0}));
    EXPECT_EQ(t.c.get<&RegionStats::copyCalls>(), 2u) << "one UFFDIO_CONTINUE per page";
    EXPECT_EQ(tm.copies, 2u);
    EXPECT_EQ(tm.pages, 2u);
    EXPECT_EQ(t.c.get<&RegionStats::pagesInstalled>(), 2u);
    EXPECT_EQ(t.state.residentPages(), 2u);
    EXPECT_TRUE(t.state.isResident(0, 2 * kHugePageSize)) << "512 bits per page";
    EXPECT_FALSE(t.state.isResident(2 * kHugePageSize, 1));
    EXPECT_EQ(std::memcmp(t.at(0) + kHugePageSize - 1000, p.data(), p.size()), 0);
    EXPECT_TRUE(allZero(t.at(0), kHugePageSize - 1000));
    EXPECT_TRUE(allZero(t.at(1) + 4000, kHugePageSize - 4000));
}

TEST(ContinueInstaller, RestoresSavedContentAndDropsIt)
{
    HugePages pool(2);
    NPF_REQUIRE_HUGE_PAGES(pool);
    HugeTarget t(2);
    auto old = randomBytes(kHugePageSize, 6);
    t.save(1, old);
    t.installer.install(t.bare({1}), nullptr);
    EXPECT_EQ(t.status, (std::vector<int>{0}));
    EXPECT_EQ(std::memcmp(t.at(1), old.data(), old.size()), 0);
    EXPECT_EQ(t.c.get<&RegionStats::restored>(), 1u);
    EXPECT_FALSE(t.state.saved(1));
    EXPECT_EQ(t.spillBytes(), 0u);
    // Mapped already: EEXIST counts, and the page stays as it is.
    t.state.markEvicted(1); // forget it, as if the install had raced
    t.installer.install(t.bare({1}), nullptr);
    EXPECT_EQ(t.status, (std::vector<int>{0}));
    EXPECT_EQ(t.c.get<&RegionStats::eexist>(), 1u);
}

TEST(Backoff, RetriesABoundedNumberOfTimes)
{
    Backoff b;
    unsigned n = 0;
    const uint64_t start = monotonicNs();
    while (b.again())
        ++n;
    const uint64_t ns = monotonicNs() - start;
    EXPECT_EQ(n, Backoff::kTries);
    EXPECT_EQ(b.tries(), Backoff::kTries);
    EXPECT_FALSE(b.again()) << "spent stays spent";
    EXPECT_GE(ns, 1'000'000u) << "sleeps once the yields are spent";
    EXPECT_LT(ns, 1'000'000'000u);
}

} // namespace
} // namespace npf::test
