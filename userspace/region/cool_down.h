// How long a client's installer gets no jobs after one that cost its pager
// much of its deadline (ClientInstaller, RemoteInstaller). A client that
// answers each job just before the deadline is never late, yet would hold
// its pager, which serves other tenants' regions too, for nearly a deadline
// on every job. So a job that took more than half its deadline is slow, and
// one that missed it (late, or not started in time) is no better: either
// starts a cool-down, during which CopyInstaller installs the client's pages
// through npfd's mapping (npfd pays: client_fallbacks). The first job after
// it is a probe: slow again, the next cool-down is twice as long; fast, the
// client is back for good.
//
// 100 ms, doubling up to 3.2 s. At the default deadline (1 ms a 4 KiB job,
// 1 ms a page of a 2 MiB one, which holds up to 4) a client slow on every
// job holds its pager for one job in 100 ms at first (1 %, 4 % with 2 MiB
// pages) and one in 3.2 s after five doublings (0.03 %, 0.13 %): its
// neighbours do not notice it. An honest client slowed for a moment (a burst
// of reclaim in its cgroup) pays for its own pages again 100 ms later, one
// that stayed slow for long within 3.2 s of catching up: npfd pays for its
// pages meanwhile, within the client's budget.
//
// Times are CLOCK_MONOTONIC in ns (monotonicNs()), passed in so that the
// tests can run it on a clock of their own.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace npf {

class CoolDown {
public:
    static constexpr uint32_t kDoublings = 5; // 100 ms to 3.2 s

    // `first`: the length of the first cool-down, after a fast job or none
    // (RegionConfig::clientCoolDown, 100 ms); 0: no cool-down at all.
    explicit CoolDown(std::chrono::milliseconds first = std::chrono::milliseconds(100)) noexcept
        : firstNs_(static_cast<uint64_t>(std::chrono::nanoseconds(first).count()))
    {
    }

    // True when a job may be posted at nowNs: no cool-down runs.
    bool over(uint64_t nowNs) const noexcept { return nowNs >= until_; }

    // A job ended within its deadline of deadlineNs, tookNs after it was
    // posted. True if it was slow (more than half its deadline): a
    // cool-down starts at nowNs. A fast one ends the doubling.
    bool ended(uint64_t tookNs, uint64_t deadlineNs, uint64_t nowNs) noexcept
    {
        if (2 * tookNs <= deadlineNs) {
            lengthNs_ = 0;
            return false;
        }
        start(nowNs);
        return true;
    }
    // A job missed its deadline at nowNs (late, or not started in time): a
    // cool-down starts too. No job is posted anyway until a late one has
    // ended; the cool-down then still has to be over.
    void missed(uint64_t nowNs) noexcept { start(nowNs); }

private:
    void start(uint64_t nowNs) noexcept
    {
        lengthNs_ = lengthNs_ ? std::min(2 * lengthNs_, firstNs_ << kDoublings) : firstNs_;
        until_ = nowNs + lengthNs_;
    }

    uint64_t firstNs_;
    uint64_t lengthNs_ = 0; // of the last cool-down; 0 after a fast job
    uint64_t until_ = 0;
};

} // namespace npf
