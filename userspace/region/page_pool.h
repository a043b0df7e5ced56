// A region's recycled pages (an in-process region on private anonymous
// memory): pages faulted in once, when the region is built, then installed
// by moving them into the region (UFFDIO_MOVE: nothing allocated, zeroed or
// copied by the kernel) and taken back the same way on eviction. On the VMs
// npf runs on, allocating a fresh page is the slow part of an install (free
// page reporting, ballooning: docs/architecture.md, "Where a region's pages
// come from"); recycling does not depend on it.
//
// Slots [0, available()) hold pages, the rest are holes: installs take from
// the top, evictions put back on top, so both move runs of consecutive
// slots in one ioctl. Bounded: an eviction that finds the pool full frees
// the page (MADV_DONTNEED), an install that finds it empty refills it with
// fresh pages first: faulted in, a quarter of the pool at a time, in a
// second mapping that no uffd watches (slot for slot), and moved in (with 2
// MiB pages a UFFDIO_COPY would install 512 small pages, and a small page
// that enters the pool stays small). Under steady eviction and installation no page is
// allocated or freed.
//
// The pool's mapping is registered (MISSING) with the region's uffd, as a
// MOVE's destination must be, so nothing may touch a slot that is a hole:
// the thread would wait on its own fault. Only the pager touches slots,
// under its region's lock, and only below available().
#pragma once

#include <cstdint>
#include <string>

#include "region/region_stats.h"
#include "sys/mmap_area.h"

namespace npf {

class Backoff;
class Userfaultfd;

class PagePool {
public:
    PagePool() noexcept = default;
    // `capacity` pages of 1 << pageShift (2 MiB: transparent huge pages,
    // where the kernel has them), faulted in now, then registered with
    // `uffd`, which must have UFFD_FEATURE_MOVE. Keeps references to uffd
    // and counters. Throws if the memory cannot be had.
    PagePool(const Userfaultfd& uffd, RegionCounters& counters, uint64_t capacity, uint32_t pageShift,
             const std::string& who);

    explicit operator bool() const noexcept { return uffd_ != nullptr; }
    uint64_t capacity() const noexcept { return capacity_; }
    uint64_t available() const noexcept { return top_; }
    // The n (<= available()) pages the next install takes: slots [top - n, top).
    uint8_t* next(uint64_t n) const noexcept { return slot(top_ - n); }
    // Tops the pool up with fresh pages (counted in pool_empty) until it
    // holds n (<= capacity()), and a quarter of its capacity at least; 0 or
    // -errno (then it holds fewer).
    int refill(uint64_t n) noexcept;
    // An install moved pages out of next(n): those slots are holes now.
    // leftovers: some were not moved (an error); they are freed.
    void consumed(uint64_t n, bool leftovers) noexcept;
    // Takes back n present pages of the region at `src`: moved into free
    // slots; any it cannot move (the pool is full, or the kernel refuses the
    // page: pinned, or shared since a fork) are freed. 0, or -errno if one
    // could be neither moved nor freed (it stays where it was).
    int takeBack(uint8_t* src, uint64_t n) noexcept;

private:
    uint8_t* slot(uint64_t i) const noexcept { return map_.as<uint8_t>() + (i << pageShift_); }
    // Moves n present pages at `src` onto the top (there is room for them),
    // retrying EAGAIN while `backoff` allows; *done gets the pages moved.
    // 0, or the -errno of the page at src + *done, which stayed where it was.
    long pushFrom(uint8_t* src, uint64_t n, uint64_t* done, Backoff& backoff) noexcept;
    int free(uint8_t* addr, uint64_t n) noexcept;

    const Userfaultfd* uffd_ = nullptr;
    RegionCounters* c_ = nullptr;
    MmapArea map_;
    MmapArea fresh_; // where refill() faults pages in: slot i of it goes to slot i of map_
    uint64_t capacity_ = 0;
    uint64_t top_ = 0;
    uint32_t pageShift_ = 0;
};

// True unless the kernel's transparent huge pages are off ("never", or not
// built in): MADV_HUGEPAGE then gets 2 MiB pages when free blocks exist.
bool transparentHugePagesOffered();

// Private anonymous memory for a region or a pool: `len` bytes aligned to
// `align` (2 MiB pages: so that each can be one transparent huge page),
// never inherited by a child (MADV_DONTFORK: a page shared with a child
// could not be moved), THP asked for when align is 2 MiB and refused
// otherwise (a 4 KiB page inside a huge folio cannot be moved alone).
MmapArea mapAnonymous(uint64_t len, uint64_t align, const std::string& what);
// Faults in `pages` pages of 1 << shift bytes at `addr` (writable, so each
// is a page of its own): MADV_POPULATE_WRITE, or a write per page before
// Linux 5.14.
void populate(uint8_t* addr, uint64_t pages, uint32_t shift) noexcept;

} // namespace npf
