// Eviction: clock victims -> clear resident bits -> grace period -> write-
// protect fence -> save (unless released) -> punch hole -> lift the fence.
//
// The grace period covers fast-path workers that saw a bit set before it was
// cleared. The write-protect fence covers every other writer (the
// application, a client writing its own mapping, a worker that skipped the
// protocol): from the fence until the hole is punched writes block in a WP
// fault, and after the fence is lifted they retry, fault MISSING and get the
// saved content, so no write is lost between save and punch. With client
// memory the fence goes up on both mappings, ours and (through the client's
// uffd, at its addresses) the client's; the punch removes the page from both.
#include <fcntl.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "region/region.h"
#include "region/region_internal.h"
#include "sys/log.h"

namespace npf {
namespace {

// Calls f(first index, count) for each run of consecutive pages in sorted v
// whose indices satisfy pred.
template <typename Pred, typename F>
void forRuns(const std::vector<uint64_t>& v, Pred pred, F f)
{
    for (size_t k = 0; k < v.size();) {
        if (!pred(k)) {
            ++k;
            continue;
        }
        size_t m = k + 1;
        while (m < v.size() && pred(m) && v[m] == v[m - 1] + 1)
            ++m;
        f(k, m - k);
        k = m;
    }
}

} // namespace

int Region::evictToBudget() noexcept
{
    std::lock_guard lk(mu_);
    if (!budgetPages_ || residentPages() <= budgetPages_)
        return 0;
    uint64_t slack = std::min<uint64_t>(batchPages_, budgetPages_ / 4);
    return evictLocked(budgetPages_ - slack, false);
}

int Region::evictAll() noexcept
{
    std::lock_guard lk(mu_);
    return evictLocked(0, true);
}

void Region::autoEvictLocked() noexcept
{
    if (!cfg_.autoEvict || !budgetPages_ || residentPages() <= budgetPages_)
        return;
    uint64_t slack = std::min<uint64_t>(batchPages_, budgetPages_ / 4);
    evictLocked(budgetPages_ - slack, false);
}

int Region::evictLocked(uint64_t targetResident, bool ignoreReferenced) noexcept
{
    // Bounded by what is over target now: faults served during grace periods
    // add pages while we work, and chasing them could go on forever.
    uint64_t res = residentPages();
    uint64_t quota = res > targetResident ? res - targetResident : 0;
    int total = 0;
    while (static_cast<uint64_t>(total) < quota && residentPages() > targetResident) {
        uint64_t want = std::min<uint64_t>({batchPages_, residentPages() - targetResident,
                                            quota - static_cast<uint64_t>(total)});
        int n = evictBatch(static_cast<uint32_t>(want), ignoreReferenced);
        if (n < 0)
            return total ? total : n;
        if (n == 0)
            break;
        total += n;
    }
    return total;
}

void Region::waitGrace() noexcept
{
    if (!cfg_.epochs)
        return;
    uint64_t e = cfg_.epochs->advance();
    if (cfg_.epochs->passed(e))
        return;
    bump(c_->graceWaits);
    uint64_t start = monotonicNs();
    uint64_t warnNs = static_cast<uint64_t>(std::chrono::nanoseconds(cfg_.graceWarn).count());
    bool warned = false;
    while (!cfg_.epochs->passed(e)) {
        // A reader may be blocked in a fault only we can serve.
        serviceFaultsLocked(nullptr);
        serviceClientFaultsLocked(nullptr);
        ::sched_yield();
        if (!warned && monotonicNs() - start > warnNs) {
            warned = true;
            NPF_WARN_RL("region %s: grace period waiting > %lld ms for a fast-path reader", cfg_.name.c_str(),
                        static_cast<long long>(cfg_.graceWarn.count()));
        }
    }
}

int Region::evictBatch(uint32_t want, bool ignoreReferenced) noexcept
{
    victims_.clear();
    uint64_t limit = 2 * clockLen_ + 1, scanned = 0;
    uint64_t p;
    while (victims_.size() < want && scanned < limit && clockPop(&p)) {
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
        if (!pushBack(victims_, p)) {
            clockPush(p);
            break;
        }
    }
    if (victims_.empty()) {
        bump(c_->evictBlocked);
        return 0;
    }
    std::sort(victims_.begin(), victims_.end());

    for (uint64_t v : victims_)
        clearResident(v);
    waitGrace();

    // failed[k]: victim k stays resident (fence, save or punch failed).
    bool failedAny = false;
    uint8_t failed[1024] = {};
    auto fail = [&](size_t k, size_t n, int err, const char* what) {
        bump(c_->errors);
        failedAny = true;
        std::memset(failed + k, 1, n);
        NPF_WARN_RL("region %s: evict %zu pages at page %llu: %s: %s", cfg_.name.c_str(), n,
                    static_cast<unsigned long long>(victims_[k]), what, std::strerror(-err));
    };
    // Released pages are dropped instead of saved. Decided here, after the
    // grace period: a fast-path writer that put new data into a released
    // page cleared its discard bit (markReferenced) inside its section, which
    // has ended now, and the pager's patches clear it under the lock we hold,
    // so a released page written since is saved. Only protect() can still
    // clear the bit from here on, and it announces content still to come.
    // The fence guards the save -> punch window of pages whose content is
    // kept; released pages are dropped anyway, so they skip it (and its TLB
    // shootdowns).
    uint8_t save[1024] = {};
    // With 2 MiB pages, also after the grace period: a writer that put new
    // data into one 4 KiB piece took that piece's release mark away inside
    // its section, racing release()'s whole-page check.
    for (size_t k = 0; k < victims_.size(); ++k)
        save[k] = !bits::testAcquire(discard_.data(), victims_[k]) ||
                  (released_.data() && !wholePageReleased(victims_[k]));
    auto isFenced = [&](size_t k) { return wp_ && save[k]; };

    if (wp_)
        forRuns(victims_, isFenced, [&](size_t k, size_t n) {
            int rc = uffd_.writeProtect(pageAddr(victims_[k]), bytes(n), true);
            if (!rc)
                rc = fenceClient(victims_[k], n, true);
            if (rc)
                fail(k, n, rc, "write-protect");
        });

    auto keep = [&](size_t k) { return !failed[k] && save[k]; };
    forRuns(victims_, keep, [&](size_t k, size_t n) {
        int rc = saveRun(victims_[k], n);
        if (rc) {
            fail(k, n, rc, "save to spill file");
            return;
        }
        for (size_t q = k; q < k + n; ++q)
            bits::set(saved_.data(), victims_[q]);
        bump(c_->spilled, n);
    });

    forRuns(victims_, [&](size_t k) { return !failed[k]; }, [&](size_t k, size_t n) {
        int rc = ::fallocate(memfd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                             static_cast<off_t>(bytes(victims_[k])), static_cast<off_t>(bytes(n)));
        if (rc)
            fail(k, n, -errno, "punch hole");
    });

    // Punched pages are accounted before the fence is lifted: lifting the
    // client's may have to read its events, and a fault served then must see
    // the page gone and restore its saved content.
    int evicted = 0;
    for (size_t k = 0; k < victims_.size(); ++k) {
        if (failed[k])
            continue;
        bits::clearAtomic(discard_.data(), victims_[k], __ATOMIC_RELAXED);
        if (released_.data()) { // it comes back whole, nothing of it released
            const uint64_t words = uint64_t{1} << (pageShift_ - NPF_PAGE_SHIFT - 6);
            for (uint64_t w = victims_[k] * words; w < (victims_[k] + 1) * words; ++w)
                __atomic_store_n(&released_.data()[w], 0, __ATOMIC_RELAXED);
        }
        if (!save[k])
            bump(c_->discarded);
        bits::clear(present_.data(), victims_[k]);
        resident_.fetch_sub(1, std::memory_order_relaxed);
        ++evicted;
    }

    if (wp_)
        forRuns(victims_, isFenced, [&](size_t k, size_t n) {
            // Lifts the fence (and its PTE markers) and wakes blocked writers.
            if (uffd_.writeProtect(pageAddr(victims_[k]), bytes(n), false))
                uffd_.wake(pageAddr(victims_[k]), bytes(n));
            fenceClient(victims_[k], n, false);
        });

    for (size_t k = 0; k < victims_.size(); ++k) {
        if (!failed[k])
            continue;
        bits::clear(saved_.data(), victims_[k]);
        clockPush(victims_[k]);
        setResident(victims_[k]);
    }
    bump(c_->evicted, static_cast<uint64_t>(evicted));
    if (failedAny && !evicted)
        return -EIO;
    return evicted;
}

} // namespace npf
