// The one clock of npf: CLOCK_MONOTONIC in nanoseconds (the clock XDP's
// bpf_ktime_get_ns() reads, so npf_meta.tstamp compares with it).
#pragma once

#include <time.h>

#include <cstdint>

namespace npf {

inline uint64_t monotonicNs() noexcept
{
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

} // namespace npf
