#include "region/page_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "region/backoff.h"
#include "region/geometry.h"
#include "region/uffd.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/log.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace npf {

bool transparentHugePagesOffered()
{
    char buf[64] = {};
    Fd f(::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC));
    if (!f || ::read(f.get(), buf, sizeof(buf) - 1) <= 0)
        return false;
    return std::strstr(buf, "[never]") == nullptr;
}

void populate(uint8_t* addr, uint64_t pages, uint32_t shift) noexcept
{
    if (::madvise(addr, pages << shift, MADV_POPULATE_WRITE) != 0)
        for (uint64_t i = 0; i < pages; ++i) // kernels before 5.14
            static_cast<volatile uint8_t*>(static_cast<void*>(addr))[i << shift] = 0;
}

MmapArea mapAnonymous(uint64_t len, uint64_t align, const std::string& what)
{
    // Over-map by the alignment, then trim both ends.
    MmapArea over = MmapArea::map(len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                  -1, 0, what);
    const uintptr_t raw = reinterpret_cast<uintptr_t>(over.get());
    const uintptr_t start = (raw + align - 1) & ~(uintptr_t{align} - 1);
    void* p = over.release();
    if (start > raw)
        ::munmap(p, start - raw);
    ::munmap(reinterpret_cast<void*>(start + len), raw + align - start);
    MmapArea area(reinterpret_cast<void*>(start), len);
    if (::madvise(area.get(), len, MADV_DONTFORK) != 0)
        throwErrno("madvise(MADV_DONTFORK) " + what);
    // Fails only without THP in the kernel, where neither is needed.
    if (::madvise(area.get(), len, align == kHugePageSize ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
        NPF_DEBUG("madvise(MADV_%sHUGEPAGE) %s: %s", align == kHugePageSize ? "" : "NO", what.c_str(),
                  std::strerror(errno));
    return area;
}

PagePool::PagePool(const Userfaultfd& uffd, RegionCounters& counters, uint64_t capacity, uint32_t pageShift,
                   const std::string& who)
    : uffd_(&uffd), c_(&counters), capacity_(capacity), pageShift_(pageShift)
{
    const std::string what = "page pool of region " + who;
    const uint64_t page = uint64_t{1} << pageShift;
    map_ = mapAnonymous(capacity << pageShift, page, what + " (" + std::to_string(capacity) + " pages)");
    // Faulted in before the registration, which would make a fault here wait on our own uffd.
    populate(map_.as<uint8_t>(), capacity, pageShift);
    uffd.registerRange(map_.get(), map_.size(), UFFDIO_REGISTER_MODE_MISSING, what);
    top_ = capacity;
    fresh_ = mapAnonymous(capacity << pageShift, page, "fresh pages of the " + what);
}

int PagePool::refill(uint64_t n) noexcept
{
    if (n <= top_)
        return 0;
    // A quarter of the pool at least (one install batch by default): the
    // allocation is the cost, the system calls around it are shared.
    const uint64_t target = std::min(capacity_, std::max(n, capacity_ / 4));
    uint8_t* src = fresh_.as<uint8_t>() + (top_ << pageShift_);
    const uint64_t want = target - top_;
    // Faulted in where no uffd is registered (slot for slot), then moved into the holes.
    populate(src, want, pageShift_);
    Backoff backoff;
    uint64_t done = 0;
    const long rc = pushFrom(src, want, &done, backoff);
    c_->add<&RegionStats::poolEmpty>(done);
    c_->add<&RegionStats::poolRefills>();
    return static_cast<int>(rc);
}

long PagePool::pushFrom(uint8_t* src, uint64_t n, uint64_t* done, Backoff& backoff) noexcept
{
    *done = 0;
    while (*done < n) {
        int64_t moved = 0;
        long rc = uffd_->move(slot(top_), src + (*done << pageShift_), (n - *done) << pageShift_, &moved);
        c_->add<&RegionStats::moveCalls>();
        const uint64_t whole = static_cast<uint64_t>(moved) >> pageShift_;
        top_ += whole;
        *done += whole;
        if (rc < 0 && !(rc == -EAGAIN && backoff.again()))
            return rc;
    }
    return 0;
}

void PagePool::consumed(uint64_t n, bool leftovers) noexcept
{
    top_ -= n;
    if (leftovers) // holes stay holes; pages left behind are freed
        (void)free(slot(top_), n);
}

int PagePool::free(uint8_t* addr, uint64_t n) noexcept
{
    return ::madvise(addr, n << pageShift_, MADV_DONTNEED) == 0 ? 0 : -errno;
}

int PagePool::takeBack(uint8_t* src, uint64_t n) noexcept
{
    Backoff backoff;
    uint64_t i = 0;
    int err = 0;
    while (i < n && top_ < capacity_) {
        uint64_t done = 0;
        const long rc = pushFrom(src + (i << pageShift_), std::min(n - i, capacity_ - top_), &done, backoff);
        i += done;
        c_->add<&RegionStats::poolReturns>(done);
        if (rc == 0)
            continue;
        // This page will not move: freed like an overflow.
        c_->add<&RegionStats::poolFull>();
        if (int f = free(src + (i << pageShift_), 1))
            err = f;
        ++i;
    }
    if (i < n) {
        c_->add<&RegionStats::poolFull>(n - i);
        if (int f = free(src + (i << pageShift_), n - i))
            err = f;
    }
    return err;
}

} // namespace npf
