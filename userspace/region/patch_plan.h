// Page-image assembly for packet faults: splits payload patches into per-page
// pieces, grouped by page in ascending order, arrival order kept within a page
// (a later payload overwrites an earlier one where they overlap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace npf {

// One payload to place at `offset` in the region.
struct Patch {
    uint64_t offset;
    const void* data;
    uint32_t len;
};

// The part of one patch that falls into one page.
struct PagePiece {
    uint64_t page;     // region page index
    uint32_t pageOff;  // byte offset inside the page
    uint32_t len;
    const uint8_t* src;
    uint32_t patch;    // index of the patch it came from
};

class PatchPlan {
public:
    explicit PatchPlan(size_t reservePieces = 1024);

    // Rebuilds the plan for pages of 1 << pageShift bytes. results[i] is set to 0 for patches that were planned
    // and -EINVAL for patches outside [0, regionSize) or with a null source;
    // zero-length patches are planned with no pieces. Returns -ENOMEM if the
    // piece table could not grow (nothing planned), else the piece count.
    int build(std::span<const Patch> patches, uint64_t regionSize, uint32_t pageShift,
              std::span<int> results) noexcept;

    std::span<const PagePiece> pieces() const noexcept { return {pieces_.data(), pieces_.size()}; }

    // [begin, end) of the pieces of the page that starts at pieces()[begin].
    size_t pageEnd(size_t begin) const noexcept
    {
        size_t e = begin + 1;
        while (e < pieces_.size() && pieces_[e].page == pieces_[begin].page)
            ++e;
        return e;
    }

    // Copies pieces [begin, end) into the page image at `page`.
    void applyTo(uint8_t* page, size_t begin, size_t end) const noexcept;

private:
    std::vector<PagePiece> pieces_;
};

} // namespace npf
