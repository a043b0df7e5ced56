// Per-stage timestamps of one install call.
#pragma once

#include <cstdint>

namespace npf {

// CLOCK_MONOTONIC ns of one install call (the clock of bpf_ktime_get_ns), for
// per-stage histograms. Zero when the stage did not happen.
struct BatchTiming {
    uint64_t start = 0;      // call entered (lock held)
    uint64_t imageReady = 0; // last page image built (staging)
    uint64_t copyDone = 0;   // last UFFDIO_COPY returned
    uint64_t end = 0;        // bits set, call about to return (before auto-eviction)
    uint32_t pages = 0;      // pages installed
    uint32_t copies = 0;     // UFFDIO_COPY calls
};

} // namespace npf
