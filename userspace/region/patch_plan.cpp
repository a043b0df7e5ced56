#include "region/patch_plan.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>


namespace npf {

PatchPlan::PatchPlan(size_t reservePieces) { pieces_.reserve(reservePieces); }

int PatchPlan::build(std::span<const Patch> patches, uint64_t regionSize, uint32_t pageShift,
                     std::span<int> results) noexcept
{
    pieces_.clear();
    try {
        for (size_t i = 0; i < patches.size(); ++i) {
            const Patch& p = patches[i];
            bool ok = p.offset <= regionSize && p.len <= regionSize - p.offset && (p.data || !p.len);
            if (i < results.size())
                results[i] = ok ? 0 : -EINVAL;
            if (!ok)
                continue;
            uint64_t off = p.offset;
            uint32_t left = p.len;
            auto src = static_cast<const uint8_t*>(p.data);
            const uint64_t page = uint64_t{1} << pageShift;
            while (left) {
                uint32_t inPage = static_cast<uint32_t>(off & (page - 1));
                uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(left, page - inPage));
                pieces_.push_back({off >> pageShift, inPage, n, src, static_cast<uint32_t>(i)});
                off += n;
                src += n;
                left -= n;
            }
        }
    } catch (const std::bad_alloc&) {
        pieces_.clear();
        return -ENOMEM;
    }
    // Patches arrive mostly in page order; the index key keeps arrival order.
    auto before = [](const PagePiece& a, const PagePiece& b) {
        return a.page != b.page ? a.page < b.page : a.patch < b.patch;
    };
    if (!std::is_sorted(pieces_.begin(), pieces_.end(), before))
        std::sort(pieces_.begin(), pieces_.end(), before);
    return static_cast<int>(pieces_.size());
}

void PatchPlan::applyTo(uint8_t* page, size_t begin, size_t end) const noexcept
{
    for (size_t i = begin; i < end; ++i)
        std::memcpy(page + pieces_[i].pageOff, pieces_[i].src, pieces_[i].len);
}

} // namespace npf
