// A memfd mapping registered with a userfaultfd and the parts of a region
// that installers and the evictor work on, without a Region around them.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "region/install_batch.h"
#include "region/page_io.h"
#include "region/page_pool.h"
#include "region/page_reserve.h"
#include "region/page_state.h"
#include "region/patch_plan.h"
#include "region/spill.h"
#include "region_fixture.h"

#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26)
#endif

namespace npf::test {

// A memfd mapped twice (registered with a uffd, and an unregistered alias),
// with the parts an installer works on.
struct PageTarget {
    PageTarget(uint64_t pages, uint32_t pageShift, uint32_t batchPages)
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
    // Bytes the spill file and the memfd really hold.
    uint64_t spillBytes() const { return blocks(spill.fd()); }
    uint64_t memfdBytes() const { return blocks(memfd.get()); }
    static uint64_t blocks(int fd)
    {
        struct stat st{};
        EXPECT_EQ(::fstat(fd, &st), 0);
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
    PagePool noPool;       // empty: installs copy
    PageReserve noReserve; // empty: copies take what the kernel gives
    PageIo io;
    PatchPlan planned;
    RegionCounters c;
    std::string name = "installer-test";
    std::vector<uint64_t> pages;
    std::vector<size_t> begin, end;
    std::vector<int> status;
};

} // namespace npf::test
