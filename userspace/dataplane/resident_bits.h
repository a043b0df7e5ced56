// A region's resident bitmap as XDP reads it: the u64 words of the region's
// BPF_F_MMAPABLE array (ResidentMap, flow_ring.h; held in
// npf_regions_<class>[flow id]), bit p of word p / 64 set while 4 KiB page p
// is resident, so XDP may steer a datagram for it to the primary ring. The
// view holds a plain pointer into its own process's mapping (or into a
// region's own words when no XDP program reads them).
//
// Orderings, stated once:
//   - a page's bits are set (release) once its content is final: XDP loads
//     a word with acquire before it steers a write into the page;
//   - they are cleared (seq_cst) before the page is evicted: the grace
//     period that follows covers every XDP run that still saw them set;
//   - clearAll() at the start and end of a region's life stores with release.
#pragma once

#include <atomic>
#include <cstdint>

namespace npf::dataplane {

class ResidentBits {
public:
    ResidentBits() noexcept = default;
    // The `count` words at `words`.
    ResidentBits(uint64_t* words, uint64_t count) noexcept : words_(words), count_(count) {}

    const uint64_t* words() const noexcept { return words_; }
    uint64_t wordCount() const noexcept { return count_; }
    explicit operator bool() const noexcept { return words_ != nullptr; }

    // 4 KiB page `page` is resident.
    bool test(uint64_t page) const noexcept
    {
        return (word(page >> 6).load(std::memory_order_acquire) >> (page & 63)) & 1;
    }
    void set(uint64_t page) noexcept { word(page >> 6).fetch_or(bit(page), std::memory_order_release); }
    void clear(uint64_t page) noexcept { word(page >> 6).fetch_and(~bit(page), std::memory_order_seq_cst); }

    // Every bit of words [first, first + n): a 2 MiB page's 512 bits.
    void setWords(uint64_t first, uint64_t n) noexcept
    {
        for (uint64_t w = first; w < first + n; ++w)
            word(w).store(~uint64_t{0}, std::memory_order_release);
    }
    void clearWords(uint64_t first, uint64_t n) noexcept
    {
        for (uint64_t w = first; w < first + n; ++w)
            word(w).store(0, std::memory_order_seq_cst);
    }

    // No page resident. Words that are zero already are not written (a
    // region's own words stay untouched memory).
    void clearAll() noexcept
    {
        for (uint64_t w = 0; w < count_; ++w)
            if (word(w).load(std::memory_order_relaxed))
                word(w).store(0, std::memory_order_release);
    }

private:
    static uint64_t bit(uint64_t page) noexcept { return uint64_t{1} << (page & 63); }
    std::atomic_ref<uint64_t> word(uint64_t i) const noexcept { return std::atomic_ref<uint64_t>(words_[i]); }

    uint64_t* words_ = nullptr;
    uint64_t count_ = 0;
};

} // namespace npf::dataplane
