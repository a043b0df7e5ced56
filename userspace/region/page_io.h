// How the pager reaches the bytes of a region's pages: their addresses in
// its registered mapping, and writes, saves and holes for pages it knows are
// present.
//
// The pager never touches a page through the mapping unless it knows the
// page is present, so it never faults on itself. A client can punch holes in
// its memfd behind that knowledge (npfd), so with client memory present pages
// are read through the memfd (pread: a hole reads as zeros) and written
// through a second mapping of it, the alias, registered with the region's
// userfaultfd in SIGBUS mode and written under a fault guard: a write into a
// hole the client punched fails (-EFAULT) instead of allocating a page npfd
// would pay for, or, for a huge page it cannot have, dying of SIGBUS.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "npf/abi.h"
#include "sys/fault_guard.h"

namespace npf {

class PagePool;
class PatchPlan;
class SpillFile;
class Userfaultfd;

class PageIo {
public:
    PageIo() noexcept = default;
    // Pages of 1 << pageShift bytes mapped at `base`, from `memfd`, and
    // again at `alias` (2 MiB pages and client memory; may be null
    // otherwise). With throughMemfd (client memory), save() reads through
    // `buf` (at least as many bytes as the longest run it saves) and patch()
    // writes through the alias, guarded (see above).
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

    // Writes plan pieces [pb, pe) (all of `page`) into the present page; 0 or
    // -errno: -EFAULT, a client's page that is not there (it punched it).
    int patch(const PatchPlan& plan, uint64_t page, size_t pb, size_t pe) const noexcept;
    // 2 MiB pages of a client: the alias is registered MINOR too, and a
    // page in the page cache that the alias does not map yet is mapped
    // through `uffd` (UFFDIO_CONTINUE) when a write faults on it.
    void mapAliasWith(const Userfaultfd* uffd) noexcept { aliasUffd_ = uffd; }

    // Runs fn(), which writes the page at `dst` (a page of an alias of the
    // memfd), under the fault guard with client memory; 0, or -EFAULT if
    // the page was not there (the client punched it).
    template <class Fn>
    int write(uint8_t* dst, Fn&& fn) const noexcept
    {
        if (!throughMemfd_) {
            fn();
            return 0;
        }
        if (guarded(dst, bytes(1), fn))
            return 0;
        return mapAlias(dst) && guarded(dst, bytes(1), fn) ? 0 : -EFAULT;
    }
    // Saves present pages [page, page + n) to the spill file at their region offsets; 0 or -errno.
    int save(const SpillFile& spill, uint64_t page, uint64_t n) const noexcept;
    // Punches pages [page, page + n) out of the memfd (every mapping of it),
    // or out of the anonymous mapping, into the pool; 0 or -errno.
    int punch(uint64_t page, uint64_t n) const noexcept;

private:
    // True if the page at alias address `dst` is in the page cache and is
    // mapped now.
    bool mapAlias(uint8_t* dst) const noexcept;

    uint8_t* base_ = nullptr;
    uint8_t* alias_ = nullptr;
    int memfd_ = -1;
    uint32_t pageShift_ = NPF_PAGE_SHIFT;
    bool throughMemfd_ = false;
    uint8_t* buf_ = nullptr;
    PagePool* pool_ = nullptr;
    const Userfaultfd* aliasUffd_ = nullptr;
};

} // namespace npf
