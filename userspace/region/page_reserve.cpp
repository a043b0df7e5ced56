#include "region/page_reserve.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "npf/abi.h"
#include "region/page_pool.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf {

PageReserve::PageReserve(RegionCounters& counters, uint64_t pages, const std::string& who) : c_(&counters)
{
    if (pages == 0)
        return;
    map_ = mapAnonymous(pages * NPF_PAGE_SIZE, NPF_PAGE_SIZE, "reserve of region " + who);
    if (::madvise(map_.get(), map_.size(), MADV_POPULATE_WRITE) != 0)
        throwErrno("faulting in the reserve of region " + who + " (" + std::to_string(pages) + " pages)");
    left_ = pages;
}

void PageReserve::release(uint64_t n) noexcept
{
    while (ahead_ < n && left_ > 0) {
        // From the top: the reserve's mapping shrinks from its end.
        const uint64_t k = std::min(std::max(n - ahead_, kFreeAhead), left_);
        uint8_t* at = map_.as<uint8_t>() + (left_ - k) * NPF_PAGE_SIZE;
        if (::madvise(at, k * NPF_PAGE_SIZE, MADV_DONTNEED) != 0) {
            NPF_WARN_RL("freeing %llu pages of a region's reserve: %s", static_cast<unsigned long long>(k),
                        std::strerror(errno));
            return;
        }
        left_ -= k;
        ahead_ += k;
        c_->add<&RegionStats::reserveFreed>(k);
    }
    ahead_ -= std::min(ahead_, n);
}

} // namespace npf
