// Eviction policy of a region (budget, slack) and what its Evictor asks of
// it: grace periods that serve faults while they wait, and the
// write-protect fence over our mapping and the client's.
#include <sched.h>

#include <algorithm>

#include "region/region.h"
#include "sys/log.h"

namespace npf {

int Region::evictToBudget() noexcept
{
    std::lock_guard lk(mu_);
    return evictToBudgetLocked();
}

int Region::evictToBudgetLocked() noexcept
{
    copy_.settle();
    if (!geo_.budgetPages || residentPages() <= geo_.budgetPages)
        return 0;
    return evictor_.evictTo(evictTarget(), false);
}

bool Region::protect(uint64_t offset, uint64_t len) noexcept
{
    if (!len || offset >= size() || len > size() - offset)
        return false;
    if (state_.protect(offset, len))
        return true;
    c_->add<&RegionStats::protectCapped>();
    NPF_WARN_RL("region %s: a buffer posted at offset %llu (%llu bytes) is not protected from eviction: posted "
                "buffers protect %llu pages, and the resident budget leaves them %llu (protect_capped)",
                cfg_.name.c_str(), static_cast<unsigned long long>(offset), static_cast<unsigned long long>(len),
                static_cast<unsigned long long>(protectedPages()), static_cast<unsigned long long>(protectLimit()));
    return false;
}

uint64_t Region::evictTarget() const noexcept
{
    // Some slack below the budget: an eviction frees a batch's worth at once.
    const uint64_t slack = std::min<uint64_t>(geo_.batchPages, geo_.budgetPages / 4);
    return geo_.budgetPages - slack;
}

int Region::evictAll() noexcept
{
    std::lock_guard lk(mu_);
    copy_.settle();
    // Asked for everything (Engine::evictAll, not the pager's budget): a
    // grace period given up (a writer held its section past graceLimit)
    // is tried again, 20 times at most, before it is the answer.
    int total = 0;
    for (int tries = 1;; ++tries) {
        const uint64_t timeouts = c_->get<&RegionStats::graceTimeouts>();
        const int n = evictor_.evictTo(0, true);
        if (n > 0)
            total += n;
        if (c_->get<&RegionStats::graceTimeouts>() == timeouts || tries == 20)
            return total ? total : n;
    }
}

void Region::autoEvictLocked() noexcept
{
    if (cfg_.autoEvict)
        (void)evictToBudgetLocked();
}

bool Region::waitGrace() noexcept
{
    if (!cfg_.epochs)
        return true;
    EpochDomain& epochs = *cfg_.epochs;
    uint64_t e = epochs.advance();
    if (epochs.passed(e))
        return true;
    c_->add<&RegionStats::graceWaits>();
    epochs.beginWait();
    const uint64_t start = monotonicNs();
    const uint64_t warnNs = static_cast<uint64_t>(std::chrono::nanoseconds(cfg_.graceWarn).count());
    const uint64_t limitNs = static_cast<uint64_t>(std::chrono::nanoseconds(cfg_.graceLimit).count());
    bool warned = false, passed = true;
    while (!epochs.passed(e)) {
        // A reader may be blocked in a fault of this region's that only we
        // can serve (an in-process region; a client's memory faults with
        // SIGBUS, see fastStore, so no reader waits on another region's).
        serviceFaultsLocked(nullptr);
        serviceClientFaultsLocked(nullptr);
        ::sched_yield();
        const uint64_t waited = monotonicNs() - start;
        if (!warned && waited > warnNs) {
            warned = true;
            NPF_WARN_RL("region %s: grace period waiting > %lld ms for a fast-path reader", cfg_.name.c_str(),
                        static_cast<long long>(cfg_.graceWarn.count()));
        }
        if (waited > limitNs && !epochs.passed(e)) {
            passed = false;
            NPF_WARN_RL("region %s: grace period given up after %lld ms (a fast-path reader held its section): "
                        "the victims stay resident, eviction tries again later",
                        cfg_.name.c_str(), static_cast<long long>(cfg_.graceLimit.count()));
            break;
        }
    }
    epochs.endWait();
    return passed;
}

int Region::raiseFence(uint64_t page, uint64_t n) noexcept
{
    if (!wp_)
        return 0;
    int rc = uffd_.writeProtect(pageAddr(page), bytes(n), true);
    return rc ? rc : fenceClient(page, n, true);
}

void Region::liftFence(uint64_t page, uint64_t n) noexcept
{
    if (!wp_)
        return;
    // Lifts the fence (and its PTE markers) and wakes blocked writers.
    if (uffd_.writeProtect(pageAddr(page), bytes(n), false))
        uffd_.wake(pageAddr(page), bytes(n));
    fenceClient(page, n, false);
}

} // namespace npf
