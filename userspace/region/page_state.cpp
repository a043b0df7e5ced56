#include "region/page_state.h"

#include <algorithm>

namespace npf {

PageState::PageState(uint64_t size, uint32_t pageShift, uint64_t* residentBitmap, const std::string& who)
    : size_(size), pages_(size >> pageShift), pageShift_(pageShift)
{
    const size_t bitmapWords = PageState::bitmapWords(size_), words = (pages_ + 63) / 64;
    if (residentBitmap) {
        bitmap_ = dataplane::ResidentBits(residentBitmap, bitmapWords);
        bitmap_.clearAll();
    } else {
        ownBitmap_ = LazyArray<uint64_t>(bitmapWords, "resident bitmap of " + who);
        bitmap_ = dataplane::ResidentBits(ownBitmap_.data(), bitmapWords);
    }
    present_ = LazyArray<uint64_t>(words, "present bitmap of " + who);
    referenced_ = LazyArray<uint64_t>(words, "referenced bitmap of " + who);
    saved_ = LazyArray<uint64_t>(words, "saved bitmap of " + who);
    discard_ = LazyArray<uint64_t>(words, "discard bitmap of " + who);
    onClock_ = LazyArray<uint64_t>(words, "clock bitmap of " + who);
    if (pageShift_ > NPF_PAGE_SHIFT)
        released_ = LazyArray<uint64_t>(bitmapWords, "released 4 KiB pieces of " + who);
    protect_ = LazyArray<uint32_t>(pages_, "protect counts of " + who);
    clock_ = LazyArray<uint32_t>(pages_, "clock of " + who);
}

PageState::~PageState() { clearResidentBitmap(); }

PageState& PageState::operator=(PageState&& o) noexcept
{
    if (this == &o)
        return *this;
    clearResidentBitmap();
    size_ = std::exchange(o.size_, 0);
    pages_ = std::exchange(o.pages_, 0);
    pageShift_ = o.pageShift_;
    ownBitmap_ = std::move(o.ownBitmap_);
    bitmap_ = std::exchange(o.bitmap_, {});
    present_ = std::move(o.present_);
    referenced_ = std::move(o.referenced_);
    saved_ = std::move(o.saved_);
    discard_ = std::move(o.discard_);
    released_ = std::move(o.released_);
    protect_ = std::move(o.protect_);
    protected_.store(o.protected_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
    protectLimit_ = std::exchange(o.protectLimit_, 0);
    clock_ = std::move(o.clock_);
    onClock_ = std::move(o.onClock_);
    clockHead_ = std::exchange(o.clockHead_, 0);
    clockLen_ = std::exchange(o.clockLen_, 0);
    resident_.store(o.resident_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
}

void PageState::clearResidentBitmap() noexcept { bitmap_.clearAll(); }

bool PageState::isResident(uint64_t offset, uint64_t len) const noexcept
{
    if (!inRange(offset, len))
        return false;
    if (!len)
        return true;
    for (uint64_t p = offset >> NPF_PAGE_SHIFT, last = (offset + len - 1) >> NPF_PAGE_SHIFT; p <= last; ++p)
        if (!bitmap_.test(p))
            return false;
    return true;
}

void PageState::setResident(uint64_t page) noexcept
{
    if (pageShift_ == NPF_PAGE_SHIFT)
        bitmap_.set(page);
    else
        bitmap_.setWords(page * wordsPerPage(), wordsPerPage());
}

void PageState::clearResident(uint64_t page) noexcept
{
    if (pageShift_ == NPF_PAGE_SHIFT)
        bitmap_.clear(page);
    else
        bitmap_.clearWords(page * wordsPerPage(), wordsPerPage());
}

void PageState::markInstalled(uint64_t page) noexcept
{
    bits::set(present_.data(), page);
    bits::setAtomic(referenced_.data(), page, __ATOMIC_RELAXED);
    clockPush(page);
    resident_.fetch_add(1, std::memory_order_relaxed);
    // Content is final: only now may XDP steer writes to this page.
    setResident(page);
}

void PageState::markEvicted(uint64_t page) noexcept
{
    bits::clearAtomic(discard_.data(), page, __ATOMIC_RELAXED);
    if (released_.data()) // it comes back whole, nothing of it released
        for (uint64_t w = page * wordsPerPage(); w < (page + 1) * wordsPerPage(); ++w)
            std::atomic_ref<uint64_t>(released_[w]).store(0, std::memory_order_relaxed);
    bits::clear(present_.data(), page);
    resident_.fetch_sub(1, std::memory_order_relaxed);
}

void PageState::markVanished(uint64_t page) noexcept
{
    clearResident(page);
    markEvicted(page);
}

void PageState::markKept(uint64_t page) noexcept
{
    clearSaved(page);
    clockPush(page);
    setResident(page);
}

void PageState::markReferenced(uint64_t offset, uint64_t len) noexcept
{
    if (!len || offset >= size_)
        return;
    uint64_t last = std::min(offset + len - 1, size_ - 1) >> pageShift_;
    for (uint64_t p = offset >> pageShift_; p <= last; ++p) {
        if (!bits::testAcquire(referenced_.data(), p))
            bits::setAtomic(referenced_.data(), p, __ATOMIC_RELAXED);
        // New data ends a release(). Eviction reads the bit after its grace
        // period, which this writer's section is part of.
        if (bits::testAcquire(discard_.data(), p))
            bits::clearAtomic(discard_.data(), p, __ATOMIC_RELAXED);
    }
    unrelease(offset, len);
}

void PageState::unrelease(uint64_t offset, uint64_t len) noexcept
{
    if (!released_.data() || !len || offset >= size_)
        return;
    const uint64_t last = std::min(offset + len - 1, size_ - 1) >> NPF_PAGE_SHIFT;
    for (uint64_t q = offset >> NPF_PAGE_SHIFT; q <= last; ++q)
        if (bits::testAcquire(released_.data(), q))
            bits::clearAtomic(released_.data(), q, __ATOMIC_RELAXED);
}

bool PageState::wholePageReleased(uint64_t page) const noexcept
{
    for (uint64_t w = page * wordsPerPage(); w < (page + 1) * wordsPerPage(); ++w)
        if (std::atomic_ref<uint64_t>(released_[w]).load(std::memory_order_acquire) != ~uint64_t{0})
            return false;
    return true;
}

std::pair<uint64_t, uint64_t> PageState::releaseRange(uint64_t offset, uint64_t len) noexcept
{
    uint64_t first = (offset + pageBytes() - 1) >> pageShift_;
    uint64_t end = (offset + len) >> pageShift_; // exclusive: only whole pages
    if (released_.data() && len) {
        // 2 MiB pages: mark the whole 4 KiB pieces; a page all of whose
        // pieces are released (now, or by earlier calls) is released whole.
        const uint64_t q0 = (offset + NPF_PAGE_SIZE - 1) >> NPF_PAGE_SHIFT, q1 = (offset + len) >> NPF_PAGE_SHIFT;
        for (uint64_t q = q0; q < q1; ++q)
            bits::setAtomic(released_.data(), q, __ATOMIC_RELAXED);
        first = offset >> pageShift_;
        end = (offset + len + pageBytes() - 1) >> pageShift_;
    }
    return {first, end};
}

bool PageState::mustSave(uint64_t page) const noexcept
{
    // With 2 MiB pages the pieces count too: a writer that put new data into
    // one 4 KiB piece took that piece's release mark away inside its
    // section, racing release()'s whole-page check.
    return !bits::testAcquire(discard_.data(), page) || (released_.data() && !wholePageReleased(page));
}

bool PageState::protect(uint64_t offset, uint64_t len) noexcept { return protect(offset, len, true); }

bool PageState::protect(uint64_t offset, uint64_t len, bool bounded) noexcept
{
    if (!len || offset >= size_ || len > size_ - offset)
        return false;
    const uint64_t first = offset >> pageShift_, last = (offset + len - 1) >> pageShift_;
    bool within = true;
    if (bounded && protectLimit_) {
        // Checked, then taken: posts racing on other threads may overshoot
        // the limit by what they protect at once, never by more.
        uint64_t fresh = 0;
        for (uint64_t p = first; p <= last; ++p)
            fresh += protectCount(p) == 0;
        within = protectedPages() + fresh <= protectLimit_;
    }
    for (uint64_t p = first; p <= last; ++p) {
        if (within)
            ref(p);
        if (bits::testAcquire(discard_.data(), p))
            bits::clearAtomic(discard_.data(), p, __ATOMIC_RELAXED);
    }
    unrelease(offset, len);
    return within;
}

void PageState::unprotect(uint64_t offset, uint64_t len) noexcept
{
    if (!len || offset >= size_ || len > size_ - offset)
        return;
    for (uint64_t p = offset >> pageShift_, last = (offset + len - 1) >> pageShift_; p <= last; ++p)
        unref(p);
}

void PageState::ref(uint64_t page) noexcept
{
    if (std::atomic_ref<uint32_t>(protect_[page]).fetch_add(1, std::memory_order_relaxed) == 0)
        protected_.fetch_add(1, std::memory_order_relaxed);
}

void PageState::unref(uint64_t page) noexcept
{
    std::atomic_ref<uint32_t> c(protect_[page]);
    uint32_t v = c.load(std::memory_order_relaxed);
    while (v && !c.compare_exchange_weak(v, v - 1, std::memory_order_relaxed)) {
    }
    if (v == 1)
        protected_.fetch_sub(1, std::memory_order_relaxed);
}

uint32_t PageState::protectCount(uint64_t page) const noexcept
{
    if (page >= pages_)
        return 0;
    return std::atomic_ref<uint32_t>(protect_[page]).load(std::memory_order_relaxed);
}

void PageState::clockPush(uint64_t page) noexcept
{
    if (bits::test(onClock_.data(), page))
        return; // once: a page that vanished and came back may still be on it
    bits::set(onClock_.data(), page);
    clock_[(clockHead_ + clockLen_) % pages_] = static_cast<uint32_t>(page);
    ++clockLen_;
}

bool PageState::clockPop(uint64_t* page) noexcept
{
    if (!clockLen_)
        return false;
    *page = clock_[clockHead_];
    bits::clear(onClock_.data(), *page);
    clockHead_ = (clockHead_ + 1) % pages_;
    --clockLen_;
    return true;
}

size_t PageState::takeVictims(std::span<uint64_t> out, bool ignoreReferenced) noexcept
{
    size_t n = 0;
    uint64_t limit = 2 * clockLen_ + 1, scanned = 0;
    uint64_t p;
    while (n < out.size() && scanned < limit && clockPop(&p)) {
        ++scanned;
        if (!present(p))
            continue;
        if (protectCount(p)) {
            clockPush(p);
            continue;
        }
        bool ref = bits::testAndClearAtomic(referenced_.data(), p, __ATOMIC_RELAXED);
        if (ref && !ignoreReferenced) {
            clockPush(p);
            continue;
        }
        out[n++] = p;
    }
    return n;
}

} // namespace npf
