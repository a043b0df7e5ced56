// A region's shape, decided once: its size, page size, resident budget and
// install/eviction batch, checked by the rules every user of a region shares
// (npf::Engine's region, npfd's client regions, npf::Client's memfd, the
// Region itself). RegionGeometry::check says what is wrong in words the
// caller prefixes with its own context.
#pragma once

#include <cstdint>
#include <string>

#include "npf/abi.h"

namespace npf {

// Page sizes a region can have: 4 KiB (shmem memfd) and 2 MiB (hugetlbfs
// memfd, MFD_HUGETLB | MFD_HUGE_2MB: pages come from the kernel's huge page
// pool, /proc/sys/vm/nr_hugepages).
constexpr uint64_t kHugePageSize = 2ull << 20;
constexpr uint32_t kHugePageShift = 21;
// 4 KiB pages per install and eviction batch, unless a region says otherwise.
constexpr uint32_t kDefaultBatchPages = 64;

struct RegionGeometry {
    uint64_t size = 0;         // bytes, a multiple of pageSize
    uint32_t pageShift = NPF_PAGE_SHIFT;
    uint64_t budgetPages = 0;  // of pageSize; 0 = unlimited
    uint32_t batchPages = 1;   // of pageSize per install and eviction batch (>= 1)

    uint64_t pageSize() const noexcept { return uint64_t{1} << pageShift; }
    uint64_t pages() const noexcept { return size >> pageShift; }
    bool huge() const noexcept { return pageShift != NPF_PAGE_SHIFT; }
    // 4 KiB pages: the bits of the resident bitmap XDP reads, whatever the page size.
    uint64_t bitmapPages() const noexcept { return size / NPF_PAGE_SIZE; }

    enum class Error { None, PageSize, Size, TooLarge, Batch };
    // `budget` in bytes (0 = unlimited; a budget under one page is one
    // page); `maxBatch4k`: 4 KiB pages per batch, 1..1024. On an error,
    // *why says what is wrong ("page size 8192 must be 4096 or 2 MiB").
    static Error check(uint64_t size, uint64_t pageSize, uint64_t budget, uint32_t maxBatch4k, RegionGeometry* out,
                       std::string* why);
};

} // namespace npf
