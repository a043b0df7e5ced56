#include "region/page_io.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>

#include "region/page_pool.h"
#include "region/patch_plan.h"
#include "region/spill.h"
#include "region/uffd.h"
#include "sys/io.h"

namespace npf {

int PageIo::patch(const PatchPlan& plan, uint64_t page, size_t pb, size_t pe) const noexcept
{
    if (!throughMemfd_) {
        plan.applyTo(addr(page), pb, pe);
        return 0;
    }
    uint8_t* dst = alias_ + bytes(page);
    return write(dst, [&] { plan.applyTo(dst, pb, pe); });
}

bool PageIo::mapAlias(uint8_t* dst) const noexcept
{
    return aliasUffd_ && aliasUffd_->mapCached(dst, bytes(1));
}

int PageIo::save(const SpillFile& spill, uint64_t page, uint64_t n) const noexcept
{
    if (!throughMemfd_)
        return spill.save(bytes(page), addr(page), bytes(n));
    // A hole reads as zeros instead of faulting.
    const ssize_t got = preadUpTo(memfd_, buf_, bytes(n), bytes(page));
    if (got < 0)
        return static_cast<int>(got);
    if (static_cast<size_t>(got) != bytes(n)) // the memfd is sealed against shrinking: cannot happen
        return -EIO;
    return spill.save(bytes(page), buf_, bytes(n));
}

int PageIo::punch(uint64_t page, uint64_t n) const noexcept
{
    if (memfd_ < 0) {
        if (pool_ && *pool_)
            return pool_->takeBack(addr(page), n);
        return ::madvise(addr(page), bytes(n), MADV_DONTNEED) == 0 ? 0 : -errno;
    }
    int rc = ::fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(bytes(page)),
                         static_cast<off_t>(bytes(n)));
    return rc == 0 ? 0 : -errno;
}

} // namespace npf
