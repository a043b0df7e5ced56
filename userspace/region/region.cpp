#include "region/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "region/region_internal.h"
#include "sys/error.h"
#include "sys/log.h"

// <sys/mman.h> of Debian 12's glibc lacks the memfd huge page size flags.
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26) // MFD_HUGE_SHIFT 26
#endif

namespace npf {

namespace {

constexpr uint64_t kPage = NPF_PAGE_SIZE;

std::string sizeStr(uint64_t b) { return std::to_string(b) + " bytes"; }

uint64_t hugePagesCount(const char* file)
{
    const std::string path = std::string("/sys/kernel/mm/hugepages/hugepages-2048kB/") + file;
    Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    char buf[32] = {};
    if (!f || ::read(f.get(), buf, sizeof(buf) - 1) <= 0)
        return 0;
    return std::strtoull(buf, nullptr, 10);
}

// A 2 MiB region takes its pages from the huge page pool as they are
// installed (MAP_NORESERVE: nothing is reserved up front). Fewer free than it
// may hold resident at once would fail installs later, so fail now, saying
// how to get them.
void checkHugePages(uint64_t need, const std::string& who)
{
    const uint64_t free = hugePagesCount("free_hugepages"), total = hugePagesCount("nr_hugepages");
    if (free >= need)
        return;
    throwErrno(ENOMEM, "region " + who + ": needs " + std::to_string(need) +
                           " free 2 MiB huge pages (its resident budget plus one batch), the kernel has " +
                           std::to_string(free) + " free of " + std::to_string(total) +
                           ": reserve more with `echo " + std::to_string(total - free + need) +
                           " > /proc/sys/vm/nr_hugepages` (or hugepages=N on the kernel command line)");
}

} // namespace

Region::Region(const RegionConfig& cfg) : Region(cfg, nullptr) {}

Region::Region(const RegionConfig& cfg, ClientMemory client) : Region(cfg, &client) {}

Region::Region(const RegionConfig& cfg, ClientMemory* client) : cfg_(cfg), c_(std::make_unique<Counters>())
{
    const std::string& who = cfg_.name;
    const bool huge = cfg_.pageSize == kHugePageSize;
    if (cfg_.pageSize != kPage && !huge)
        throwErrno(EINVAL, "region " + who + ": page size " + sizeStr(cfg_.pageSize) + " must be 4096 or 2 MiB");
    if (huge && client)
        throwErrno(EINVAL, "region " + who + ": client memory has 4 KiB pages");
    pageShift_ = huge ? 21 : NPF_PAGE_SHIFT;
    const uint64_t page = cfg_.pageSize;
    if (cfg_.size == 0 || cfg_.size % page)
        throwErrno(EINVAL, "region " + who + ": size " + sizeStr(cfg_.size) + " must be a non-zero multiple of " +
                               (huge ? "2 MiB (its page size)" : "4096"));
    if (cfg_.size / kPage > NPF_MAX_REGION_PAGES)
        throwErrno(EINVAL, "region " + who + ": size " + sizeStr(cfg_.size) + " exceeds the 1 TiB maximum");
    if (cfg_.maxBatchPages == 0 || cfg_.maxBatchPages > 1024)
        throwErrno(EINVAL, "region " + who + ": maxBatchPages must be 1..1024");
    size_ = cfg_.size;
    pages_ = size_ >> pageShift_;
    batchPages_ = std::max<uint32_t>(1, static_cast<uint32_t>((uint64_t{cfg_.maxBatchPages} * kPage) >> pageShift_));
    budgetPages_ = cfg_.residentBudget >> pageShift_;
    if (cfg_.residentBudget && budgetPages_ == 0)
        budgetPages_ = 1;

    if (client) {
        adoptMemfd(std::move(client->memfd));
    } else {
        memfd_.reset(::memfd_create(who.c_str(), MFD_CLOEXEC | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0)));
        if (!memfd_)
            throwErrno(huge ? "memfd_create(MFD_HUGETLB | MFD_HUGE_2MB) for region " + who +
                                  " (does the kernel have hugetlbfs?)"
                            : "memfd_create for region " + who);
        if (::ftruncate(memfd_.get(), static_cast<off_t>(size_)) != 0)
            throwErrno("size region memfd " + who + " to " + sizeStr(size_));
        if (huge)
            checkHugePages(budgetPages_ ? budgetPages_ + batchPages_ : pages_, who);
    }
    map_ = MmapArea::map(size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd_.get(), 0,
                         "region " + who + " (" + sizeStr(size_) + ")");

    uffd_ = Userfaultfd::open(UFFD_FEATURE_MISSING_SHMEM |
                                  (huge ? UFFD_FEATURE_MISSING_HUGETLBFS | UFFD_FEATURE_MINOR_HUGETLBFS : 0),
                              UFFD_FEATURE_WP_HUGETLBFS_SHMEM, "region " + who);
    // 2 MiB pages are installed with UFFDIO_CONTINUE: MINOR mode as well, so
    // that a page in the page cache but not yet mapped here still faults.
    const uint64_t modes = UFFDIO_REGISTER_MODE_MISSING | (huge ? UFFDIO_REGISTER_MODE_MINOR : 0);
    if (huge)
        alias_ = MmapArea::map(size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd_.get(), 0,
                               "alias of region " + who);
    wp_ = cfg_.writeProtectFence && (uffd_.features() & UFFD_FEATURE_WP_HUGETLBFS_SHMEM);
    if (wp_) {
        try {
            uffd_.registerRange(base(), size_, modes | UFFDIO_REGISTER_MODE_WP, "region " + who);
        } catch (const std::system_error& e) {
            NPF_WARN("region %s: write-protect registration refused (%s); eviction relies on grace periods only",
                     who.c_str(), e.what());
            wp_ = false;
        }
    }
    if (!wp_)
        uffd_.registerRange(base(), size_, modes, "region " + who);

    if (client && client->spill)
        spill_ = SpillFile::adopt(std::move(client->spill), size_, "region " + who);
    else
        spill_ = SpillFile::open(size_, cfg_.spillDir, who + "-spill");

    const size_t bitmapWords = residentBitmapWords(), words = (pages_ + 63) / 64;
    if (cfg_.residentBitmap) {
        bitmap_ = cfg_.residentBitmap;
        for (size_t i = 0; i < bitmapWords; ++i)
            __atomic_store_n(&bitmap_[i], 0, __ATOMIC_RELEASE);
    } else {
        ownBitmap_ = LazyArray<uint64_t>(bitmapWords, "resident bitmap of " + who);
        bitmap_ = ownBitmap_.data();
    }
    present_ = LazyArray<uint64_t>(words, "present bitmap of " + who);
    referenced_ = LazyArray<uint64_t>(words, "referenced bitmap of " + who);
    saved_ = LazyArray<uint64_t>(words, "saved bitmap of " + who);
    discard_ = LazyArray<uint64_t>(words, "discard bitmap of " + who);
    if (huge)
        released_ = LazyArray<uint64_t>(bitmapWords, "released 4 KiB pieces of " + who);
    protect_ = LazyArray<uint32_t>(pages_, "protect counts of " + who);
    clock_ = LazyArray<uint32_t>(pages_, "clock of " + who);

    staging_ = MmapArea::map(bytes(batchPages_), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0,
                             "staging pages of " + who);
    std::memset(staging_.get(), 0, staging_.size());
    scratchPages_.reserve(4096);
    scratchBegin_.reserve(4096);
    scratchEnd_.reserve(4096);
    scratchStatus_.reserve(4096);
    victims_.reserve(batchPages_);
    msgs_.resize(64);
    if (client && client->uffd)
        adoptClientUffd(std::move(client->uffd), client->base);
    NPF_DEBUG("region %s: %llu pages of %s, budget %llu pages, write-protect fence %s%s", who.c_str(),
              static_cast<unsigned long long>(pages_), huge ? "2 MiB" : "4 KiB",
              static_cast<unsigned long long>(budgetPages_),
              wp_ ? "on" : "off",
              !adopted_      ? ""
              : !clientUffd_ ? ", client memory (its faults not served)"
              : clientWp_    ? ", client memory, fence covers the client"
                             : ", client memory, client not fenced");
}

Region::~Region()
{
    if (bitmap_) {
        const size_t words = residentBitmapWords();
        for (size_t i = 0; i < words; ++i)
            if (bitmap_[i])
                __atomic_store_n(&bitmap_[i], 0, __ATOMIC_RELEASE);
    }
}

bool Region::isResident(uint64_t offset, uint64_t len) const noexcept
{
    if (offset > size_ || len > size_ - offset)
        return false;
    if (!len)
        return true;
    for (uint64_t p = offset >> NPF_PAGE_SHIFT, last = (offset + len - 1) >> NPF_PAGE_SHIFT; p <= last; ++p)
        if (!bits::testAcquire(bitmap_, p))
            return false;
    return true;
}

void Region::markReferenced(uint64_t offset, uint64_t len) noexcept
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

void Region::unrelease(uint64_t offset, uint64_t len) noexcept
{
    if (!released_.data() || !len || offset >= size_)
        return;
    const uint64_t last = std::min(offset + len - 1, size_ - 1) >> NPF_PAGE_SHIFT;
    for (uint64_t q = offset >> NPF_PAGE_SHIFT; q <= last; ++q)
        if (bits::testAcquire(released_.data(), q))
            bits::clearAtomic(released_.data(), q, __ATOMIC_RELAXED);
}

bool Region::wholePageReleased(uint64_t page) const noexcept
{
    const uint64_t words = uint64_t{1} << (pageShift_ - NPF_PAGE_SHIFT - 6);
    for (uint64_t w = page * words; w < (page + 1) * words; ++w)
        if (__atomic_load_n(&released_.data()[w], __ATOMIC_ACQUIRE) != ~uint64_t{0})
            return false;
    return true;
}

void Region::clockPush(uint64_t page) noexcept
{
    clock_[(clockHead_ + clockLen_) % pages_] = static_cast<uint32_t>(page);
    ++clockLen_;
}

bool Region::clockPop(uint64_t* page) noexcept
{
    if (!clockLen_)
        return false;
    *page = clock_[clockHead_];
    clockHead_ = (clockHead_ + 1) % pages_;
    --clockLen_;
    return true;
}

void Region::setResident(uint64_t page) noexcept
{
    if (pageShift_ == NPF_PAGE_SHIFT) {
        bits::setAtomic(bitmap_, page, __ATOMIC_RELEASE);
        return;
    }
    const uint64_t words = uint64_t{1} << (pageShift_ - NPF_PAGE_SHIFT - 6); // 8 for 2 MiB
    for (uint64_t w = page * words; w < (page + 1) * words; ++w)
        __atomic_store_n(&bitmap_[w], ~uint64_t{0}, __ATOMIC_RELEASE);
}

void Region::clearResident(uint64_t page) noexcept
{
    if (pageShift_ == NPF_PAGE_SHIFT) {
        bits::clearAtomic(bitmap_, page, __ATOMIC_SEQ_CST);
        return;
    }
    const uint64_t words = uint64_t{1} << (pageShift_ - NPF_PAGE_SHIFT - 6);
    for (uint64_t w = page * words; w < (page + 1) * words; ++w)
        __atomic_store_n(&bitmap_[w], 0, __ATOMIC_SEQ_CST);
}

void Region::markInstalled(uint64_t page) noexcept
{
    bits::set(present_.data(), page);
    bits::setAtomic(referenced_.data(), page, __ATOMIC_RELAXED);
    clockPush(page);
    resident_.fetch_add(1, std::memory_order_relaxed);
    // Content is final: only now may XDP steer writes to this page.
    setResident(page);
}

// UFFDIO_COPY found the page present although we had not installed it (it was
// populated behind our back): keep what is there, patch our pieces in.
int Region::onExisting(uint64_t page, size_t pb, size_t pe) noexcept
{
    bump(c_->eexist);
    int rc = patchInPlace(page, pb, pe);
    markInstalled(page);
    uffd_.wake(pageAddr(page), bytes(1));
    return rc;
}

void Region::installHugePages(std::span<const uint64_t> pages, const size_t* pb, const size_t* pe, int* status,
                              BatchTiming* t) noexcept
{
    for (size_t k = 0; k < pages.size(); ++k) {
        const uint64_t page = pages[k];
        const off_t off = static_cast<off_t>(bytes(page));
        uint8_t* a = alias_.as<uint8_t>() + off;
        const bool saved = bits::test(saved_.data(), page);
        const char* what = "fallocate (is the huge page pool empty? /proc/sys/vm/nr_hugepages)";
        int rc = ::fallocate(memfd_.get(), 0, off, static_cast<off_t>(bytes(1))) == 0 ? 0 : -errno;
        if (!rc && saved && (rc = spill_.load(bytes(page), a, bytes(1))) != 0)
            what = "reading its saved content from the spill file";
        if (!rc && pb)
            plan_.applyTo(a, pb[k], pe[k]);
        if (t)
            t->imageReady = monotonicNs();
        if (!rc) {
            long c;
            int again = 0;
            do
                c = uffd_.continueRange(pageAddr(page), bytes(1), nullptr);
            while (c == -EAGAIN && ++again < 100);
            bump(c_->copyCalls);
            if (t)
                ++t->copies;
            if (c == -EEXIST)
                bump(c_->eexist); // mapped already: what the page cache holds is what we wrote
            rc = c >= 0 || c == -EEXIST ? 0 : static_cast<int>(c);
            what = "UFFDIO_CONTINUE";
        }
        if (t)
            t->copyDone = monotonicNs();
        status[k] = rc;
        if (rc) {
            bump(c_->errors);
            NPF_WARN_RL("region %s: installing 2 MiB page %llu: %s: %s", cfg_.name.c_str(),
                        static_cast<unsigned long long>(page), what, std::strerror(-rc));
            // A page not installed leaves nothing in the page cache: the next
            // attempt starts from a fresh zeroed page.
            (void)::fallocate(memfd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
                              static_cast<off_t>(bytes(1)));
            continue;
        }
        markInstalled(page);
        bump(c_->pagesInstalled);
        if (t)
            ++t->pages;
        if (saved) {
            bits::clear(saved_.data(), page);
            bump(c_->restored);
            spill_.drop(bytes(page), bytes(1));
        }
    }
}

void Region::installPages(std::span<const uint64_t> pages, const size_t* pb, const size_t* pe, int* status,
                          BatchTiming* t) noexcept
{
    if (!alias_) {
        installCopied(pages, pb, pe, status, t);
        return;
    }
    // 2 MiB pages, the faster primitive per case (npf-uffd-bench, one core):
    // a page with saved content is read into staging and copied (pread +
    // UFFDIO_COPY at 17 GB/s beats fallocate's zeroing at 13 GB/s plus the
    // same pread); one without is zeroed by fallocate and mapped with
    // CONTINUE (no image to clear and copy).
    for (size_t k = 0; k < pages.size(); ++k) {
        const auto one = pages.subspan(k, 1);
        if (bits::test(saved_.data(), pages[k]))
            installCopied(one, pb ? pb + k : nullptr, pe ? pe + k : nullptr, status + k, t);
        else
            installHugePages(one, pb ? pb + k : nullptr, pe ? pe + k : nullptr, status + k, t);
    }
}

void Region::installCopied(std::span<const uint64_t> pages, const size_t* pb, const size_t* pe, int* status,
                           BatchTiming* t) noexcept
{
    uint8_t* stg = staging_.as<uint8_t>();
    size_t n = pages.size();
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && j - i < batchPages_ && pages[j] == pages[j - 1] + 1)
            ++j;
        size_t cnt = j - i;

        int loadErr = 0;
        for (size_t k = i; k < j && !loadErr;) {
            bool sv = bits::test(saved_.data(), pages[k]);
            size_t m = k + 1;
            while (m < j && bits::test(saved_.data(), pages[m]) == sv)
                ++m;
            uint8_t* dst = stg + bytes(k - i);
            if (sv)
                loadErr = spill_.load(bytes(pages[k]), dst, bytes(m - k));
            else
                std::memset(dst, 0, bytes(m - k));
            k = m;
        }
        if (loadErr) {
            bump(c_->errors);
            NPF_WARN_RL("region %s: reading saved pages from the spill file: %s", cfg_.name.c_str(),
                        std::strerror(-loadErr));
            for (size_t k = i; k < j; ++k)
                status[k] = loadErr;
            i = j;
            continue;
        }
        if (pb)
            for (size_t k = i; k < j; ++k)
                plan_.applyTo(stg + bytes(k - i), pb[k], pe[k]);
        if (t)
            t->imageReady = monotonicNs();

        uint64_t len = bytes(cnt), done = 0;
        int again = 0;
        uint8_t* dst = pageAddr(pages[i]);
        while (done < len) {
            int64_t copied = 0;
            long rc = uffd_.copy(dst + done, stg + done, len - done, &copied);
            bump(c_->copyCalls);
            if (t)
                ++t->copies;
            uint64_t whole = static_cast<uint64_t>(copied) & ~(bytes(1) - 1);
            for (uint64_t b = done; b < done + whole; b += bytes(1)) {
                size_t k = i + (b >> pageShift_);
                markInstalled(pages[k]);
                status[k] = 0;
            }
            bump(c_->pagesInstalled, whole >> pageShift_);
            if (t)
                t->pages += static_cast<uint32_t>(whole >> pageShift_);
            done += whole;
            if (rc >= 0)
                break;
            if (rc == -EEXIST) {
                size_t k = i + (done >> pageShift_);
                status[k] = onExisting(pages[k], pb ? pb[k] : 0, pb ? pe[k] : 0);
                done += bytes(1);
                continue;
            }
            if (rc == -EAGAIN && ++again < 1000)
                continue;
            bump(c_->errors);
            NPF_WARN_RL("region %s: UFFDIO_COPY of %llu pages at page %llu: %s", cfg_.name.c_str(),
                        static_cast<unsigned long long>((len - done) >> pageShift_),
                        static_cast<unsigned long long>(pages[i + (done >> pageShift_)]), std::strerror(static_cast<int>(-rc)));
            for (size_t k = i + (done >> pageShift_); k < j; ++k)
                status[k] = static_cast<int>(rc);
            break;
        }
        if (t)
            t->copyDone = monotonicNs();

        // Pages installed now (copied, or found present: EEXIST, whatever a
        // patch into it returned) no longer need their saved copy.
        for (size_t k = i; k < j;) {
            if (!present(pages[k]) || !bits::test(saved_.data(), pages[k])) {
                ++k;
                continue;
            }
            size_t m = k;
            while (m < j && present(pages[m]) && bits::test(saved_.data(), pages[m]) &&
                   pages[m] == pages[k] + (m - k)) {
                bits::clear(saved_.data(), pages[m]);
                ++m;
            }
            bump(c_->restored, m - k);
            spill_.drop(bytes(pages[k]), bytes(m - k));
            k = m;
        }
        i = j;
    }
}

int Region::applyPatches(std::span<const Patch> patches, std::span<int> results, BatchTiming* t) noexcept
{
    if (results.size() < patches.size())
        return -EINVAL;
    std::lock_guard lk(mu_);
    if (t)
        *t = BatchTiming{monotonicNs()};
    int rc = plan_.build(patches, size_, pageShift_, results);
    if (rc < 0)
        return rc;
    auto pieces = plan_.pieces();
    scratchPages_.clear();
    scratchBegin_.clear();
    scratchEnd_.clear();
    for (size_t b = 0, e = 0; b < pieces.size(); b = e) {
        e = plan_.pageEnd(b);
        uint64_t page = pieces[b].page;
        bits::clearAtomic(discard_.data(), page, __ATOMIC_RELAXED);
        for (size_t k = b; released_.data() && k < e; ++k)
            unrelease(bytes(page) + pieces[k].pageOff, pieces[k].len);
        if (present(page)) {
            if (int prc = patchInPlace(page, b, e)) {
                bump(c_->errors);
                NPF_WARN_RL("region %s: writing a payload into page %llu: %s", cfg_.name.c_str(),
                            static_cast<unsigned long long>(page), std::strerror(-prc));
                for (size_t k = b; k < e; ++k)
                    results[pieces[k].patch] = prc;
                continue;
            }
            bits::setAtomic(referenced_.data(), page, __ATOMIC_RELAXED);
            bump(c_->patchesToResident, e - b);
            continue;
        }
        bool ok = pushBack(scratchPages_, page);
        if (ok && !(ok = pushBack(scratchBegin_, b)))
            scratchPages_.pop_back();
        if (ok && !(ok = pushBack(scratchEnd_, e))) {
            scratchPages_.pop_back();
            scratchBegin_.pop_back();
        }
        if (!ok)
            for (size_t k = b; k < e; ++k)
                results[pieces[k].patch] = -ENOMEM;
    }
    size_t n = scratchPages_.size();
    if (!ensureSize(scratchStatus_, n))
        return -ENOMEM;
    std::fill(scratchStatus_.begin(), scratchStatus_.end(), -EIO);
    if (n) {
        installPages({scratchPages_.data(), n}, scratchBegin_.data(), scratchEnd_.data(), scratchStatus_.data(), t);
        for (size_t k = 0; k < n; ++k) {
            if (scratchStatus_[k] == 0) {
                bump(c_->packetFaults);
                continue;
            }
            for (size_t q = scratchBegin_[k]; q < scratchEnd_[k]; ++q)
                results[pieces[q].patch] = scratchStatus_[k];
        }
    }
    int done = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < patches.size(); ++i)
        if (results[i] == 0) {
            ++done;
            bytes += patches[i].len;
        }
    bump(c_->packetBatches);
    bump(c_->patches, static_cast<uint64_t>(done));
    bump(c_->patchBytes, bytes);
    if (t)
        t->end = monotonicNs();
    autoEvictLocked();
    return done;
}

int Region::serviceFaults(BatchTiming* t) noexcept
{
    std::lock_guard lk(mu_);
    if (t)
        *t = BatchTiming{monotonicNs()};
    int rc = serviceFaultsLocked(t);
    if (t)
        t->end = monotonicNs();
    autoEvictLocked();
    return rc;
}

int Region::installFaulted(BatchTiming* t) noexcept
{
    std::sort(scratchPages_.begin(), scratchPages_.end());
    scratchPages_.erase(std::unique(scratchPages_.begin(), scratchPages_.end()), scratchPages_.end());
    if (scratchPages_.empty())
        return 0;
    if (!ensureSize(scratchStatus_, scratchPages_.size()))
        return -ENOMEM;
    std::fill(scratchStatus_.begin(), scratchStatus_.end(), -EIO);
    installPages(scratchPages_, nullptr, nullptr, scratchStatus_.data(), t);
    return 0;
}

// A MISSING fault on a page we installed: the event raced with the install
// (the page is there: EEXIST), or another process punched the page (a client
// can punch its memfd): install it again, zeroed, as nothing was saved.
// Returns true if it was installed again.
bool Region::refill(uint64_t page) noexcept
{
    uint8_t* zero = staging_.as<uint8_t>();
    std::memset(zero, 0, bytes(1));
    long rc = uffd_.copy(pageAddr(page), zero, bytes(1), nullptr);
    bump(c_->copyCalls);
    if (rc >= 0) {
        bump(c_->vanished);
        bump(c_->pagesInstalled);
        return true;
    }
    if (rc != -EEXIST) {
        bump(c_->errors);
        NPF_WARN_RL("region %s: UFFDIO_COPY refilling page %llu: %s", cfg_.name.c_str(),
                    static_cast<unsigned long long>(page), std::strerror(static_cast<int>(-rc)));
    }
    return false;
}

int Region::serviceFaultsLocked(BatchTiming* t) noexcept
{
    int served = 0;
    uintptr_t lo = reinterpret_cast<uintptr_t>(base());
    for (int round = 0; round < 16; ++round) {
        int n = uffd_.readEvents(msgs_.data(), static_cast<int>(msgs_.size()));
        if (n < 0) {
            bump(c_->errors);
            return served ? served : n;
        }
        if (n == 0)
            break;
        scratchPages_.clear();
        for (int m = 0; m < n; ++m) {
            const uffd_msg& msg = msgs_[m];
            if (msg.event != UFFD_EVENT_PAGEFAULT)
                continue;
            uintptr_t a = static_cast<uintptr_t>(msg.arg.pagefault.address);
            if (a < lo || a - lo >= size_)
                continue;
            uint64_t page = (a - lo) >> pageShift_;
            ++served;
            bump(c_->cpuFaults);
            // WP: left over from an eviction whose fence is lifted; the
            // waiter only needs to retry. Present: see refill().
            bool wpFault = msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP;
            if ((msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_MINOR) && !wpFault) {
                // 2 MiB pages: in the page cache, not mapped here. Present:
                // map it. Not: left by an install that failed; start afresh.
                if (present(page)) {
                    bump(c_->cpuFaultWakes);
                    (void)uffd_.continueRange(pageAddr(page), bytes(1), nullptr);
                    uffd_.wake(pageAddr(page), bytes(1));
                    continue;
                }
                (void)::fallocate(memfd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                  static_cast<off_t>(bytes(page)), static_cast<off_t>(bytes(1)));
            } else if (wpFault || present(page)) {
                if (!wpFault && refill(page))
                    continue; // UFFDIO_COPY woke the waiter
                bump(c_->cpuFaultWakes);
                uffd_.wake(pageAddr(page), bytes(1));
                continue;
            }
            if (!pushBack(scratchPages_, page)) {
                bump(c_->errors);
                uffd_.wake(pageAddr(page), bytes(1)); // faults again later
            }
        }
        int rc = installFaulted(t);
        for (size_t k = 0; k < scratchPages_.size(); ++k)
            if (rc || scratchStatus_[k] != 0) // never leave a faulting thread hanging
                uffd_.wake(pageAddr(scratchPages_[k]), bytes(1));
        if (n < static_cast<int>(msgs_.size()))
            break;
    }
    return served;
}

int Region::prefetch(uint64_t offset, uint64_t len) noexcept
{
    if (offset > size_ || len > size_ - offset)
        return -EINVAL;
    if (!len)
        return 0;
    std::lock_guard lk(mu_);
    uint64_t first = offset >> pageShift_, last = (offset + len - 1) >> pageShift_;
    int installed = 0;
    for (uint64_t p = first; p <= last;) {
        scratchPages_.clear();
        // One batch at a time, evicting after each: residency stays within
        // the budget plus one batch however long the range is.
        for (; p <= last && scratchPages_.size() < batchPages_; ++p)
            if (!present(p) && !pushBack(scratchPages_, p))
                return installed ? installed : -ENOMEM;
        if (scratchPages_.empty())
            continue;
        if (!ensureSize(scratchStatus_, scratchPages_.size()))
            return installed ? installed : -ENOMEM;
        std::fill(scratchStatus_.begin(), scratchStatus_.end(), -EIO);
        installPages(scratchPages_, nullptr, nullptr, scratchStatus_.data(), nullptr);
        for (int s : scratchStatus_)
            installed += s == 0;
        autoEvictLocked();
    }
    bump(c_->prefetched, static_cast<uint64_t>(installed));
    return installed;
}

void Region::protect(uint64_t offset, uint64_t len) noexcept
{
    if (!len || offset >= size_ || len > size_ - offset)
        return;
    for (uint64_t p = offset >> pageShift_, last = (offset + len - 1) >> pageShift_; p <= last; ++p) {
        std::atomic_ref<uint32_t>(protect_[p]).fetch_add(1, std::memory_order_relaxed);
        if (bits::testAcquire(discard_.data(), p))
            bits::clearAtomic(discard_.data(), p, __ATOMIC_RELAXED);
    }
    unrelease(offset, len);
}

void Region::unprotect(uint64_t offset, uint64_t len) noexcept
{
    if (!len || offset >= size_ || len > size_ - offset)
        return;
    for (uint64_t p = offset >> pageShift_, last = (offset + len - 1) >> pageShift_; p <= last; ++p) {
        std::atomic_ref<uint32_t> c(protect_[p]);
        uint32_t v = c.load(std::memory_order_relaxed);
        while (v && !c.compare_exchange_weak(v, v - 1, std::memory_order_relaxed)) {
        }
    }
}

uint32_t Region::protectCount(uint64_t page) const noexcept
{
    if (page >= pages_)
        return 0;
    return std::atomic_ref<uint32_t>(protect_[page]).load(std::memory_order_relaxed);
}

int Region::release(uint64_t offset, uint64_t len) noexcept
{
    if (offset > size_ || len > size_ - offset)
        return -EINVAL;
    std::lock_guard lk(mu_);
    uint64_t first = (offset + bytes(1) - 1) >> pageShift_;
    uint64_t end = (offset + len) >> pageShift_; // exclusive: only whole pages
    if (released_.data() && len) {
        // 2 MiB pages: mark the whole 4 KiB pieces; a page all of whose
        // pieces are released (now, or by earlier calls) is released whole.
        const uint64_t q0 = (offset + NPF_PAGE_SIZE - 1) >> NPF_PAGE_SHIFT, q1 = (offset + len) >> NPF_PAGE_SHIFT;
        for (uint64_t q = q0; q < q1; ++q)
            bits::setAtomic(released_.data(), q, __ATOMIC_RELAXED);
        first = offset >> pageShift_;
        end = (offset + len + bytes(1) - 1) >> pageShift_;
    }
    int n = 0;
    for (uint64_t p = first; p < end; ++p) {
        if (released_.data() && !wholePageReleased(p))
            continue;
        if (present(p)) {
            bits::setAtomic(discard_.data(), p, __ATOMIC_RELAXED);
        } else if (bits::test(saved_.data(), p)) {
            bits::clear(saved_.data(), p);
            spill_.drop(bytes(p), bytes(1));
        }
        ++n;
    }
    return n;
}

RegionStats Region::stats() const noexcept
{
    static constexpr auto atomics = regionCounters<Counters, std::atomic<uint64_t>>();
    static_assert(sizeof(Counters) == atomics.size() * sizeof(std::atomic<uint64_t>),
                  "Region::Counters: one atomic per kRegionCounters entry");
    RegionStats s;
    for (size_t i = 0; i < kRegionCounters.size(); ++i)
        s.*kRegionCounters[i].member = (c_.get()->*atomics[i].member).load(std::memory_order_relaxed);
    s.residentPages = residentPages();
    return s;
}

} // namespace npf
