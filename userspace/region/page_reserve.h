// Pages set aside for a region's copy route (RegionBacking::Anonymous): a
// private mapping faulted in when the region is built, given back to the
// kernel a run at a time just before an install copies that many pages in.
// The pages go to the per-CPU free list of the pager's CPU, and the copy's
// allocation, on the same CPU a moment later, takes them from there: pages
// the hypervisor already backs, instead of fresh ones (on a VM with free page
// reporting a fresh page costs 10 us or more; a recycled one well under 1 us:
// docs/architecture.md, "Where a region's pages come from"). Used up once;
// then installs allocate as before.
#pragma once

#include <cstdint>
#include <string>

#include "region/region_stats.h"
#include "sys/mmap_area.h"

namespace npf {

class PageReserve {
public:
    PageReserve() noexcept = default;
    // `pages` 4 KiB pages faulted in now; keeps a reference to counters.
    // Throws if the memory cannot be had.
    PageReserve(RegionCounters& counters, uint64_t pages, const std::string& who);

    uint64_t left() const noexcept { return left_; }
    // Frees min(n, left()) pages of the reserve (reserve_freed): the next
    // copy of n pages on this CPU finds them on its free list.
    void release(uint64_t n) noexcept;

private:
    RegionCounters* c_ = nullptr;
    MmapArea map_;
    uint64_t left_ = 0; // pages [0, left_) are still held
};

} // namespace npf
