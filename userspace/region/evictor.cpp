#include "region/evictor.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "region/page_io.h"
#include "region/page_state.h"
#include "region/spill.h"
#include "sys/log.h"

namespace npf {

Evictor::Evictor(const RegionParts& parts, Host& host, uint32_t batchPages)
    : state_(parts.state), io_(parts.io), spill_(parts.spill), c_(parts.counters), host_(host), name_(parts.name), victims_(batchPages),
      save_(batchPages), failed_(batchPages)
{
}

int Evictor::evictTo(uint64_t targetResident, bool ignoreReferenced) noexcept
{
    // Bounded by what is over target now: faults served during grace periods
    // add pages while we work, and chasing them could go on forever.
    const uint64_t res = state_.residentPages();
    const uint64_t quota = res > targetResident ? res - targetResident : 0;
    int total = 0;
    while (static_cast<uint64_t>(total) < quota && state_.residentPages() > targetResident) {
        uint64_t want = std::min<uint64_t>({victims_.size(), state_.residentPages() - targetResident,
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

template <typename Pred, typename F>
void Evictor::forRuns(Pred pred, F f)
{
    for (size_t k = 0; k < n_;) {
        if (!pred(k)) {
            ++k;
            continue;
        }
        size_t m = k + 1;
        while (m < n_ && pred(m) && victims_[m] == victims_[m - 1] + 1)
            ++m;
        f(k, m - k);
        k = m;
    }
}

int Evictor::evictBatch(uint32_t want, bool ignoreReferenced) noexcept
{
    n_ = state_.takeVictims({victims_.data(), std::min<size_t>(want, victims_.size())}, ignoreReferenced);
    if (!n_) {
        c_.add<&RegionStats::evictBlocked>();
        return 0;
    }
    std::sort(victims_.begin(), victims_.begin() + static_cast<ptrdiff_t>(n_));
    for (size_t k = 0; k < n_; ++k)
        state_.clearResident(victims_[k]);
    if (!host_.waitGrace()) {
        // A writer held its epoch past the bound: none of them may go. They
        // stay as they were (their bits set again), and the caller tries
        // again later rather than wait on the writer without end.
        for (size_t k = 0; k < n_; ++k)
            state_.markKept(victims_[k]);
        c_.add<&RegionStats::graceTimeouts>();
        return -ETIMEDOUT;
    }

    decideSaves();
    fence();
    save();
    punch();
    // Punched pages are accounted before the fence is lifted: lifting the
    // client's may have to read its events, and a fault served then must see
    // the page gone and restore its saved content.
    const int evicted = account();
    liftFence();
    keepFailed();
    c_.add<&RegionStats::evicted>(static_cast<uint64_t>(evicted));
    if (failedAny_ && !evicted)
        return -EIO;
    return evicted;
}

void Evictor::fail(size_t k, size_t n, int err, const char* what) noexcept
{
    c_.add<&RegionStats::errors>();
    failedAny_ = true;
    std::memset(failed_.data() + k, 1, n);
    NPF_WARN_RL("region %s: evict %zu pages at page %llu: %s: %s", name_.c_str(), n,
                static_cast<unsigned long long>(victims_[k]), what, std::strerror(-err));
}

// Released pages are dropped instead of saved. Decided here, after the grace
// period: a fast-path writer that put new data into a released page cleared
// its discard bit (markReferenced) inside its section, which has ended now,
// and the pager's patches clear it under the lock we hold, so a released page
// written since is saved. Only protect() can still clear the bit from here
// on, and it announces content still to come. The fence guards the save ->
// punch window of pages whose content is kept; released pages are dropped
// anyway, so they skip it (and its TLB shootdowns).
void Evictor::decideSaves() noexcept
{
    failedAny_ = false;
    for (size_t k = 0; k < n_; ++k) {
        failed_[k] = 0;
        save_[k] = state_.mustSave(victims_[k]);
    }
}

void Evictor::fence() noexcept
{
    forRuns([&](size_t k) { return save_[k]; }, [&](size_t k, size_t n) {
        if (int rc = host_.raiseFence(victims_[k], n))
            fail(k, n, rc, "write-protect");
    });
}

void Evictor::save() noexcept
{
    forRuns([&](size_t k) { return !failed_[k] && save_[k]; }, [&](size_t k, size_t n) {
        if (int rc = io_.save(spill_, victims_[k], n)) {
            fail(k, n, rc, "save to spill file");
            return;
        }
        for (size_t q = k; q < k + n; ++q)
            state_.setSaved(victims_[q]);
        c_.add<&RegionStats::spilled>(n);
    });
}

void Evictor::punch() noexcept
{
    forRuns([&](size_t k) { return !failed_[k]; }, [&](size_t k, size_t n) {
        if (int rc = io_.punch(victims_[k], n))
            fail(k, n, rc, "punch hole");
    });
}

int Evictor::account() noexcept
{
    int evicted = 0;
    for (size_t k = 0; k < n_; ++k) {
        if (failed_[k])
            continue;
        if (!save_[k])
            c_.add<&RegionStats::discarded>();
        state_.markEvicted(victims_[k]);
        ++evicted;
    }
    return evicted;
}

void Evictor::liftFence() noexcept
{
    forRuns([&](size_t k) { return save_[k]; }, [&](size_t k, size_t n) { host_.liftFence(victims_[k], n); });
}

void Evictor::keepFailed() noexcept
{
    for (size_t k = 0; k < n_; ++k)
        if (failed_[k])
            state_.markKept(victims_[k]);
}

} // namespace npf
