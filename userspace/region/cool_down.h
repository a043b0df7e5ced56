// How long a client's installer gets no jobs after it held its pager too long
// (ClientInstaller, RemoteInstaller). A client that answers each job just
// before the deadline is never late, yet would hold its pager, which serves
// other tenants' regions too, for nearly a deadline on every job. So a job
// that took more than half its deadline is slow, and one that missed it
// (late, or not started in time) is no better.
//
// Slow time is forgiven up to a bound: a client may spend up to four
// deadlines in slow jobs at once, earning it back at 2 % of the time that
// passes (20 ms a second). An honest client slowed for a moment (a burst of
// reclaim in its cgroup, its installer waiting for a CPU on a loaded host)
// keeps its jobs; one that stays slow runs out. Then a cool-down starts,
// during which CopyInstaller installs the client's pages through npfd's
// mapping (npfd pays: client_fallbacks). The first job after it is a probe:
// slow again, the next cool-down is twice as long, with nothing forgiven;
// fast, the client is back, its forgiven time refilling from none.
//
// 100 ms, doubling up to 3.2 s. At the default deadline (1 ms a 4 KiB job,
// 1 ms a page of a 2 MiB one, which holds up to 4) a client slow on every
// job holds its pager for four deadlines at first, then one job in 100 ms
// (1 %, 4 % with 2 MiB pages) and one in 3.2 s after five doublings (0.03 %,
// 0.13 %). One that answers each probe at once gets its jobs back, and with
// them the slow time 2 % of the cool-down earned: three deadlines in 100 ms
// at most (3 %). Measured on this project's 2-vCPU VM, an honest client
// streaming 16 MiB at once had 1 to 6 slow or late jobs: 0 to 2 % of its
// pages went through npfd's mapping (two thirds with none forgiven).
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
    static constexpr uint32_t kDoublings = 5;  // 100 ms to 3.2 s
    static constexpr uint32_t kForgiven = 4;   // deadlines of slow time at most
    static constexpr uint64_t kEarnedPer = 50; // 1 ns of it per 50 ns that pass

    // `first`: the length of the first cool-down, after a fast job or none
    // (RegionConfig::clientCoolDown, 100 ms); 0: no cool-down at all.
    // `forgiven`: the deadlines of slow time forgiven at most
    // (RegionConfig::clientSlowForgiven); 0: none, the first slow job
    // starts a cool-down.
    explicit CoolDown(std::chrono::milliseconds first = std::chrono::milliseconds(100),
                      uint32_t forgiven = kForgiven) noexcept
        : firstNs_(static_cast<uint64_t>(std::chrono::nanoseconds(first).count())), forgiven_(forgiven)
    {
    }

    // True when a job may be posted at nowNs: no cool-down runs.
    bool over(uint64_t nowNs) const noexcept { return nowNs >= until_; }

    // A job ended within its deadline of deadlineNs, tookNs after it was
    // posted. True if it was slow (more than half its deadline): its time
    // is forgiven or a cool-down starts at nowNs. A fast one ends the
    // doubling.
    bool ended(uint64_t tookNs, uint64_t deadlineNs, uint64_t nowNs) noexcept
    {
        if (2 * tookNs <= deadlineNs) {
            lengthNs_ = 0;
            return false;
        }
        strike(std::min(tookNs, deadlineNs), deadlineNs, nowNs);
        return true;
    }
    // A job missed its deadline at nowNs (late, or not started in time): it
    // held the pager a whole deadline. No job is posted anyway until a late
    // one has ended; a cool-down then still has to be over.
    void missed(uint64_t deadlineNs, uint64_t nowNs) noexcept { strike(deadlineNs, deadlineNs, nowNs); }

private:
    void strike(uint64_t heldNs, uint64_t deadlineNs, uint64_t nowNs) noexcept
    {
        // Earned since the last strike, up to `forgiven_` deadlines (the
        // first strike finds the whole of it).
        const uint64_t cap = forgiven_ * deadlineNs;
        const uint64_t earned = seen_ ? (nowNs - std::min(nowNs, lastNs_)) / kEarnedPer : cap;
        forgivenNs_ = std::min(cap, forgivenNs_ + earned);
        lastNs_ = nowNs;
        seen_ = true;
        if (lengthNs_ == 0 && forgivenNs_ >= heldNs) { // not a probe after a cool-down
            forgivenNs_ -= heldNs;
            return;
        }
        forgivenNs_ = 0;
        lengthNs_ = lengthNs_ ? std::min(2 * lengthNs_, firstNs_ << kDoublings) : firstNs_;
        until_ = nowNs + lengthNs_;
    }

    uint64_t firstNs_;
    uint32_t forgiven_;
    uint64_t lengthNs_ = 0;   // of the last cool-down; 0 after a fast job
    uint64_t until_ = 0;
    uint64_t forgivenNs_ = 0; // slow time the client may still spend
    uint64_t lastNs_ = 0;     // of the last strike
    bool seen_ = false;       // a strike before
};

} // namespace npf
