#include "region/geometry.h"

#include <algorithm>

namespace npf {
namespace {

std::string bytes(uint64_t n)
{
    if (n && n % (1ull << 40) == 0)
        return std::to_string(n >> 40) + " TiB";
    if (n && n % (1ull << 30) == 0)
        return std::to_string(n >> 30) + " GiB";
    if (n && n % (1ull << 20) == 0)
        return std::to_string(n >> 20) + " MiB";
    return std::to_string(n) + " bytes";
}

} // namespace

RegionGeometry::Error RegionGeometry::check(uint64_t size, uint64_t pageSize, uint64_t budget, uint32_t maxBatch4k,
                                            RegionGeometry* out, std::string* why)
{
    const bool huge = pageSize == kHugePageSize;
    if (pageSize != NPF_PAGE_SIZE && !huge) {
        *why = "page size " + std::to_string(pageSize) + " must be 4096 or 2 MiB";
        return Error::PageSize;
    }
    if (size == 0 || size % pageSize) {
        *why = "size " + bytes(size) + " must be a non-zero multiple of " + (huge ? "2 MiB (its page size)" : "4096");
        return Error::Size;
    }
    if (size / NPF_PAGE_SIZE > NPF_MAX_REGION_PAGES) {
        *why = "size " + bytes(size) + " exceeds the maximum of " + bytes(uint64_t{NPF_MAX_REGION_PAGES} * NPF_PAGE_SIZE);
        return Error::TooLarge;
    }
    if (maxBatch4k == 0 || maxBatch4k > 1024) {
        *why = "the batch of " + std::to_string(maxBatch4k) + " pages must be 1..1024";
        return Error::Batch;
    }
    RegionGeometry g;
    g.size = size;
    g.pageShift = huge ? kHugePageShift : NPF_PAGE_SHIFT;
    g.budgetPages = budget ? std::max<uint64_t>(1, budget >> g.pageShift) : 0;
    g.batchPages = std::max<uint32_t>(1, static_cast<uint32_t>((uint64_t{maxBatch4k} * NPF_PAGE_SIZE) >> g.pageShift));
    *out = g;
    return Error::None;
}

} // namespace npf
