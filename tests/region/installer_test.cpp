// The two install primitives on their own, over a real userfaultfd-registered
// memfd mapping without a Region around them: CopyInstaller (images built in
// staging, UFFDIO_COPY per run, EEXIST, saved content, spill errors) and
// ContinueInstaller (2 MiB pages: fallocate + alias + UFFDIO_CONTINUE); and
// the bounded EAGAIN backoff both use.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "huge_pages.h"
#include "region/backoff.h"
#include "region/continue_installer.h"
#include "region/copy_installer.h"
#include "region/page_io.h"
#include "region/page_state.h"
#include "region/patch_plan.h"
#include "region/region_internal.h"
#include "region/spill.h"
#include "region_fixture.h"

#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26)
#endif

namespace npf::test {
using topology::HugePages;
namespace {

// A memfd mapped twice (registered with a uffd, and an unregistered alias),
// with the parts an installer works on.
struct Target {
    Target(uint64_t pages, uint32_t pageShift, uint32_t batchPages)
        : shift(pageShift), size(pages << pageShift), batch(batchPages)
    {
        const bool huge = pageShift != NPF_PAGE_SHIFT;
        memfd.reset(::memfd_create("npf-installer-test", MFD_CLOEXEC | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0)));
        EXPECT_TRUE(memfd) << std::strerror(errno);
        EXPECT_EQ(::ftruncate(memfd.get(), static_cast<off_t>(size)), 0);
        map = MmapArea::map(size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd.get(), 0, "target");
        alias = MmapArea::map(size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd.get(), 0, "alias");
        uffd = Userfaultfd::open(UFFD_FEATURE_MISSING_SHMEM |
                                     (huge ? UFFD_FEATURE_MISSING_HUGETLBFS | UFFD_FEATURE_MINOR_HUGETLBFS : 0),
                                 0, "installer test");
        uffd.registerRange(map.get(), size,
                           UFFDIO_REGISTER_MODE_MISSING | (huge ? UFFDIO_REGISTER_MODE_MINOR : 0), "target");
        spill = SpillFile::open(size, "", "npf-installer-test-spill");
        state = PageState(size, pageShift, nullptr, "installer test");
        staging = MmapArea::map(uint64_t{batch} << pageShift, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                -1, 0, "staging");
        io = PageIo(map.as<uint8_t>(), pageShift, memfd.get(), false, staging.as<uint8_t>());
    }

    uint8_t* at(uint64_t page) const { return map.as<uint8_t>() + (page << shift); }
    uint64_t pageBytes() const { return uint64_t{1} << shift; }
    // Bytes the spill file really holds.
    uint64_t spillBytes() const
    {
        struct stat st{};
        EXPECT_EQ(::fstat(spill.fd(), &st), 0);
        return static_cast<uint64_t>(st.st_blocks) * 512;
    }
    // Saves `content` (one page) as page's saved copy.
    void save(uint64_t page, const std::vector<uint8_t>& content)
    {
        ASSERT_EQ(spill.save(page << shift, content.data(), content.size()), 0);
        state.setSaved(page);
    }
    // Plans `patches`: pages, begin and end get the plan's pages in order
    // and their piece ranges.
    void plan(std::span<const Patch> patches)
    {
        std::vector<int> res(patches.size());
        ASSERT_GE(planned.build(patches, size, shift, res), 0);
        pages.clear();
        begin.clear();
        end.clear();
        auto pieces = planned.pieces();
        for (size_t b = 0, e; b < pieces.size(); b = e) {
            e = planned.pageEnd(b);
            pages.push_back(pieces[b].page);
            begin.push_back(b);
            end.push_back(e);
        }
        status.assign(pages.size(), -EIO);
    }
    InstallBatch withPieces() { return {pages, begin.data(), end.data(), status.data()}; }
    InstallBatch bare(std::vector<uint64_t> ps)
    {
        pages = std::move(ps);
        status.assign(pages.size(), -EIO);
        return {pages, nullptr, nullptr, status.data()};
    }

    uint32_t shift;
    uint64_t size;
    uint32_t batch;
    Fd memfd;
    MmapArea map, alias;
    Userfaultfd uffd;
    SpillFile spill;
    PageState state;
    MmapArea staging;
    PageIo io;
    PatchPlan planned;
    RegionCounters c;
    std::string name = "installer-test";
    std::vector<uint64_t> pages;
    std::vector<size_t> begin, end;
    std::vector<int> status;
};

struct CopyTarget : Target {
    explicit CopyTarget(uint32_t batchPages, uint64_t pages = 64) : Target(pages, NPF_PAGE_SHIFT, batchPages) {}
    CopyInstaller installer{uffd, io, state, spill, planned, staging, batch, c, name};
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
    EXPECT_EQ(t.c.copyCalls.load(), 3u) << "1-4, 5-7, 9";
    EXPECT_EQ(tm.copies, 3u);
    EXPECT_EQ(tm.pages, 8u);
    EXPECT_EQ(t.c.pagesInstalled.load(), 8u);
    EXPECT_NE(tm.imageReady, 0u);
    EXPECT_NE(tm.copyDone, 0u);
    EXPECT_EQ(t.state.residentPages(), 8u);
    EXPECT_TRUE(t.state.isResident(kPg, 7 * kPg));
    EXPECT_FALSE(t.state.isResident(8 * kPg, 1));
    EXPECT_TRUE(allZero(t.at(1), 7 * kPg)) << "installed pages read zero, without a fault";
    EXPECT_EQ(t.c.errors.load(), 0u);
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
    EXPECT_EQ(t.c.restored.load(), 1u);
    EXPECT_FALSE(t.state.saved(11));
    EXPECT_EQ(t.spillBytes(), spilled - kPg) << "the saved copy is dropped";
    EXPECT_EQ(t.c.copyCalls.load(), 2u) << "10-11, 20";
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
    EXPECT_EQ(t.c.eexist.load(), 1u);
    EXPECT_EQ(t.c.pagesInstalled.load(), 2u) << "EEXIST is not an install";
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
    t.spill = SpillFile::adopt(std::move(wronly), t.size, "write-only spill");
    t.installer.install(t.bare({4, 5, 6}), nullptr);
    EXPECT_EQ(t.status, (std::vector<int>{-EBADF, -EBADF, 0})) << "runs 4-5 and 6";
    EXPECT_EQ(t.c.errors.load(), 1u);
    EXPECT_FALSE(t.state.present(5));
    EXPECT_TRUE(t.state.saved(5)) << "still saved: a later install tries again";
    EXPECT_EQ(t.state.residentPages(), 1u);
}

struct HugeTarget : Target {
    explicit HugeTarget(uint64_t pages) : Target(pages, 21, 1) {}
    ContinueInstaller installer{uffd, io, alias, state, spill, planned, c, name};
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
    EXPECT_EQ(t.c.copyCalls.load(), 2u) << "one UFFDIO_CONTINUE per page";
    EXPECT_EQ(tm.copies, 2u);
    EXPECT_EQ(tm.pages, 2u);
    EXPECT_EQ(t.c.pagesInstalled.load(), 2u);
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
    EXPECT_EQ(t.c.restored.load(), 1u);
    EXPECT_FALSE(t.state.saved(1));
    EXPECT_EQ(t.spillBytes(), 0u);
    // Mapped already: EEXIST counts, and the page stays as it is.
    t.state.markEvicted(1); // forget it, as if the install had raced
    t.installer.install(t.bare({1}), nullptr);
    EXPECT_EQ(t.status, (std::vector<int>{0}));
    EXPECT_EQ(t.c.eexist.load(), 1u);
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
