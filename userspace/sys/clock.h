// The one clock of npf: CLOCK_MONOTONIC in nanoseconds (the clock XDP's
// bpf_ktime_get_ns() reads, so npf_meta.tstamp compares with it).
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace npf {

inline uint64_t monotonicNs() noexcept
{
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// poll(2)'s timeout for a wait of `timeout` (negative: forever) that ends at
// `deadline`: -1 (forever), else the milliseconds left, rounded up, >= 0.
inline int pollTimeoutMs(std::chrono::milliseconds timeout, std::chrono::steady_clock::time_point deadline) noexcept
{
    if (timeout.count() < 0)
        return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT32_MAX));
}

} // namespace npf
