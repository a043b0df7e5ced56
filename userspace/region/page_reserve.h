// Pages set aside for a region's copy route (RegionBacking::Anonymous): a
// private mapping faulted in when the region is built, given back to the
// kernel kFreeAhead pages at a time, just before the installs that copy as
// many pages in. The pages go to the free lists of the pager's CPU, and the
// copies' allocations, on the same CPU a moment later, take them from
// there: pages the hypervisor already backs, instead of fresh ones (on a VM
// with free page reporting a fresh page costs 10 us or more; a recycled one
// well under 1 us: docs/architecture.md, "Where a region's pages come
// from"). In runs of kFreeAhead, because each MADV_DONTNEED flushes the TLB
// of every CPU the process runs on (the workers'), an exit to the host per
// CPU on a VM with shadow page tables; freed pages the kernel reports to the
// host meanwhile (after 2 s unused) are fresh again. Used up once; then
// installs allocate as before.
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

    static constexpr uint64_t kFreeAhead = 512; // 2 MiB

    uint64_t left() const noexcept { return left_; }
    // An install is about to copy n pages in: frees pages of the reserve
    // (reserve_freed), kFreeAhead at a time, until those freed and not yet
    // copied into cover n or the reserve is gone.
    void release(uint64_t n) noexcept;

private:
    RegionCounters* c_ = nullptr;
    MmapArea map_;
    uint64_t left_ = 0;  // pages [0, left_) are still held
    uint64_t ahead_ = 0; // freed, not yet taken by a copy
};

} // namespace npf
