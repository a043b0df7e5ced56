// A batch of missing pages for an installer, and where their outcome goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace npf {

struct InstallBatch {
    std::span<const uint64_t> pages; // sorted, unique
    // Packet faults: plan pieces [begin[k], end[k]) belong to pages[k]. Null: no payloads.
    const size_t* begin = nullptr;
    const size_t* end = nullptr;
    int* status = nullptr;           // status[k]: 0 when pages[k] is in, else -errno

    size_t size() const noexcept { return pages.size(); }
    size_t piecesBegin(size_t k) const noexcept { return begin ? begin[k] : 0; }
    size_t piecesEnd(size_t k) const noexcept { return begin ? end[k] : 0; }
    // Pages [k, k + n) of this batch.
    InstallBatch sub(size_t k, size_t n) const noexcept
    {
        return {pages.subspan(k, n), begin ? begin + k : nullptr, begin ? end + k : nullptr, status + k};
    }
};

} // namespace npf
