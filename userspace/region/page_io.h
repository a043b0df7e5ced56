// How the pager reaches the bytes of a region's pages: their addresses in
// its registered mapping, and writes, saves and holes for pages it knows are
// present.
//
// The pager never touches a page through the mapping unless it knows the
// page is present, so it never faults on itself. A client can punch holes in
// its memfd behind that knowledge (npfd), so with client memory present pages
// are read and written through the memfd (pread/pwrite) instead: a hole then
// reads as zeros, or is filled, rather than faulting on our own uffd, which
// only the pager thread itself could serve.
#pragma once

#include <cstddef>
#include <cstdint>

#include "npf/abi.h"

namespace npf {

class PagePool;
class PatchPlan;
class SpillFile;

class PageIo {
public:
    PageIo() noexcept = default;
    // Pages of 1 << pageShift bytes mapped at `base`, from `memfd`. With
    // throughMemfd, save() reads through `buf` (at least as many bytes as
    // the longest run it saves), and patch() writes with pwrite, or through
    // `alias` (an unregistered mapping of the memfd) when given: hugetlbfs
    // has no write(2); a hole is then filled by the alias's own fault.
    PageIo(uint8_t* base, uint32_t pageShift, int memfd, bool throughMemfd, uint8_t* buf,
           uint8_t* alias = nullptr) noexcept
        : base_(base), alias_(alias), memfd_(memfd), pageShift_(pageShift), throughMemfd_(throughMemfd), buf_(buf)
    {
    }
    // Private anonymous memory (no memfd): punch() gives the pages to
    // `pool` (may be null: they are freed).
    PageIo(uint8_t* base, uint32_t pageShift, PagePool* pool) noexcept
        : base_(base), pageShift_(pageShift), pool_(pool)
    {
    }

    uint8_t* addr(uint64_t page) const noexcept { return base_ + (page << pageShift_); }
    uint64_t bytes(uint64_t pages) const noexcept { return pages << pageShift_; }
    uint32_t pageShift() const noexcept { return pageShift_; }
    int memfd() const noexcept { return memfd_; }

    // Writes plan pieces [pb, pe) (all of `page`) into the present page; 0 or -errno.
    int patch(const PatchPlan& plan, uint64_t page, size_t pb, size_t pe) const noexcept;
    // Saves present pages [page, page + n) to the spill file at their region offsets; 0 or -errno.
    int save(const SpillFile& spill, uint64_t page, uint64_t n) const noexcept;
    // Punches pages [page, page + n) out of the memfd (every mapping of it),
    // or out of the anonymous mapping, into the pool; 0 or -errno.
    int punch(uint64_t page, uint64_t n) const noexcept;

private:
    uint8_t* base_ = nullptr;
    uint8_t* alias_ = nullptr;
    int memfd_ = -1;
    uint32_t pageShift_ = NPF_PAGE_SHIFT;
    bool throughMemfd_ = false;
    uint8_t* buf_ = nullptr;
    PagePool* pool_ = nullptr;
};

} // namespace npf
