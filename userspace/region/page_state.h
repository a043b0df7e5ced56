// Per-page bookkeeping of a region, no kernel handle in it: which pages are
// present (the pager's view), referenced (the clock's second chance), saved
// (in the spill file), released (discard; with 2 MiB pages per 4 KiB piece
// too), their protect refcounts, the clock ring, the resident count, and the
// resident bits in XDP's bitmap, which stays at 4 KiB granularity: 1 bit per
// 4 KiB page, 512 bits (8 words) per 2 MiB page.
//
// Threading: the pager changes it under its region's lock. markReferenced,
// protect, unprotect, protectCount, protectedPages, isResident and
// residentPages are lock-free: fast-path writers and the engine call them from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "dataplane/resident_bits.h"
#include "npf/abi.h"
#include "sys/lazy_array.h"

namespace npf {

class PageState {
public:
    PageState() noexcept = default;
    // A region of `size` bytes in pages of 1 << pageShift bytes (12 or 21).
    // residentBitmap: XDP's (bitmapWords(size) words), cleared now and at
    // destruction, so it must outlive this; nullptr: an own one.
    PageState(uint64_t size, uint32_t pageShift, uint64_t* residentBitmap, const std::string& who);
    ~PageState();
    PageState(PageState&& o) noexcept { *this = std::move(o); }
    PageState& operator=(PageState&& o) noexcept;
    PageState(const PageState&) = delete;
    PageState& operator=(const PageState&) = delete;

    static size_t bitmapWords(uint64_t size) noexcept { return (size / NPF_PAGE_SIZE + 63) / 64; }
    uint64_t pages() const noexcept { return pages_; }
    const uint64_t* residentBitmap() const noexcept { return bitmap_.words(); }

    // True if every 4 KiB page of [offset, offset + len) has its resident bit set.
    bool isResident(uint64_t offset, uint64_t len) const noexcept;
    void setResident(uint64_t page) noexcept;
    void clearResident(uint64_t page) noexcept;

    bool present(uint64_t page) const noexcept { return bits::test(present_.data(), page); }
    uint64_t residentPages() const noexcept { return resident_.load(std::memory_order_relaxed); }
    // The page is in with its final content: present, referenced, on the
    // clock, counted, and (last) its resident bits set.
    void markInstalled(uint64_t page) noexcept;
    // An evicted page: not present, not counted, nothing of it released (it
    // comes back whole).
    void markEvicted(uint64_t page) noexcept;
    // A page that is gone without an eviction (a client punched it): its
    // resident bits cleared, then markEvicted. Nothing of it is saved.
    void markVanished(uint64_t page) noexcept;
    // A victim that stays resident (its eviction failed): back on the clock,
    // its resident bits set again, a saved copy (if the save got that far) stale.
    void markKept(uint64_t page) noexcept;

    // Pages of [offset, offset + len) recently written: a second chance for
    // the clock, and the end of a release() (the page holds new data). A
    // fast-path writer calls it inside the epoch section that wrote them.
    void markReferenced(uint64_t offset, uint64_t len) noexcept;
    void setReferenced(uint64_t page) noexcept { bits::setAtomic(referenced_.data(), page, __ATOMIC_RELAXED); }

    bool saved(uint64_t page) const noexcept { return bits::test(saved_.data(), page); }
    void setSaved(uint64_t page) noexcept { bits::set(saved_.data(), page); }
    void clearSaved(uint64_t page) noexcept { bits::clear(saved_.data(), page); }

    // Releases the pages fully inside [offset, offset + len); with 2 MiB
    // pages it marks the whole 4 KiB pieces, and a page all of whose pieces
    // are released (now, or by earlier calls) is released whole. A released
    // present page is discarded at eviction; a released page that is not
    // present loses its saved mark and dropSaved(page) frees its copy.
    // Returns the pages released.
    template <typename DropSaved>
    int release(uint64_t offset, uint64_t len, DropSaved dropSaved) noexcept;
    // The pager writes new content into `page` (under the lock eviction
    // decides under): it is no longer released ...
    void newContent(uint64_t page) noexcept { bits::clearAtomic(discard_.data(), page, __ATOMIC_RELAXED); }
    // ... and with 2 MiB pages neither are the 4 KiB pieces of
    // [offset, offset + len) it writes.
    void unrelease(uint64_t offset, uint64_t len) noexcept;
    // Evicting `page` must save its content: not released, or (2 MiB) not
    // every piece of it. Read after the grace period (see Evictor).
    bool mustSave(uint64_t page) const noexcept;

    // Refcounts of pages of posted-but-unfilled buffers: eviction skips them.
    // protect() also cancels a release() of those pages (new content is
    // coming). Protection is bounded by the resident budget: with a limit
    // set, a range whose protection would hold more than `limit` pages at
    // once is not protected (false; its release is cancelled all the same):
    // its pages may be evicted before the datagram comes, which the fault
    // path then places. Without it, one post over the whole region would
    // hold the region resident whatever its budget.
    void limitProtection(uint64_t pages) noexcept { protectLimit_ = pages; }
    bool protect(uint64_t offset, uint64_t len) noexcept;
    // protect() that the limit never refuses: the pager's own need (the
    // pages a late client job may still write).
    void protectAlways(uint64_t offset, uint64_t len) noexcept { (void)protect(offset, len, false); }
    // Undoes a protect() that returned true, and protectAlways().
    void unprotect(uint64_t offset, uint64_t len) noexcept;
    uint32_t protectCount(uint64_t page) const noexcept;
    // Pages with a protect reference now.
    uint64_t protectedPages() const noexcept { return protected_.load(std::memory_order_relaxed); }
    // One more (one fewer) protect reference on `page` alone, release marks
    // untouched and never refused: the pager holds a page it works on
    // outside the lock.
    void hold(uint64_t page) noexcept { ref(page); }
    void unhold(uint64_t page) noexcept { unref(page); }

    // The clock: a ring of present pages, the hand at its head.
    void clockPush(uint64_t page) noexcept;
    bool clockPop(uint64_t* page) noexcept;
    uint64_t clockLength() const noexcept { return clockLen_; }
    // Takes up to out.size() victims off the clock: present pages, neither
    // protected nor (unless ignoreReferenced) referenced since the hand last
    // passed; a referenced page loses its bit and goes back on the clock
    // (second chance), a protected one goes back as it is. Scans each page at
    // most twice. Returns the victims, in clock order.
    size_t takeVictims(std::span<uint64_t> out, bool ignoreReferenced) noexcept;

private:
    uint64_t pageBytes() const noexcept { return uint64_t{1} << pageShift_; }
    // Words of released_ (and of XDP's bitmap) per page: 8 for 2 MiB.
    uint64_t wordsPerPage() const noexcept { return uint64_t{1} << (pageShift_ - NPF_PAGE_SHIFT - 6); }
    bool inRange(uint64_t offset, uint64_t len) const noexcept { return offset <= size_ && len <= size_ - offset; }
    bool wholePageReleased(uint64_t page) const noexcept;
    // Marks what release(offset, len) releases of 2 MiB pages' pieces; the
    // pages [first, end) for it to look at.
    std::pair<uint64_t, uint64_t> releaseRange(uint64_t offset, uint64_t len) noexcept;
    void releasePresent(uint64_t page) noexcept { bits::setAtomic(discard_.data(), page, __ATOMIC_RELAXED); }
    void clearResidentBitmap() noexcept;
    bool protect(uint64_t offset, uint64_t len, bool bounded) noexcept;
    void ref(uint64_t page) noexcept;
    void unref(uint64_t page) noexcept;

    uint64_t size_ = 0;
    uint64_t pages_ = 0;
    uint32_t pageShift_ = NPF_PAGE_SHIFT;

    LazyArray<uint64_t> ownBitmap_;
    dataplane::ResidentBits bitmap_;    // resident bits (shared with XDP)
    LazyArray<uint64_t> present_;       // page is in the memfd (pager's view)
    LazyArray<uint64_t> referenced_;    // clock second-chance bits
    LazyArray<uint64_t> saved_;         // content is in the spill file
    LazyArray<uint64_t> discard_;       // released: evict without saving
    // 2 MiB pages: release() marks 4 KiB pieces (XDP's bitmap granularity);
    // a page whose 512 pieces are all released is discarded as a whole, and
    // new content in a piece takes its mark away. Empty with 4 KiB pages.
    LazyArray<uint64_t> released_;
    LazyArray<uint32_t> protect_;       // posted-buffer refcounts
    std::atomic<uint64_t> protected_{0}; // pages whose refcount is not 0
    uint64_t protectLimit_ = 0;         // of protected_; 0: none
    LazyArray<uint32_t> clock_;         // ring of present pages, hand at head
    LazyArray<uint64_t> onClock_;       // the page is in clock_ (at most once)
    uint64_t clockHead_ = 0, clockLen_ = 0;
    std::atomic<uint64_t> resident_{0}; // present pages
};

template <typename DropSaved>
int PageState::release(uint64_t offset, uint64_t len, DropSaved dropSaved) noexcept
{
    const auto [first, end] = releaseRange(offset, len);
    int n = 0;
    for (uint64_t p = first; p < end; ++p) {
        if (released_.data() && !wholePageReleased(p))
            continue;
        if (present(p)) {
            releasePresent(p);
        } else if (saved(p)) {
            clearSaved(p);
            dropSaved(p);
        }
        ++n;
    }
    return n;
}

} // namespace npf
