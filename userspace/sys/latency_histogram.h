// Fixed-bucket log2 latency histogram: 16 linear sub-buckets per power of two
// (<= 6.25 % bucket width; 976 buckets, 7.6 KiB), values in any unit (ns by
// convention). record() is wait-free and may race with readers; quantiles are
// bucket midpoints clamped to the observed min/max.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace npf {

class LatencyHistogram {
public:
    static constexpr int kSubBits = 4;
    static constexpr int kSub = 1 << kSubBits;
    static constexpr int kBuckets = kSub + (64 - kSubBits) * kSub;

    LatencyHistogram() = default;
    LatencyHistogram(const LatencyHistogram& o) { merge(o); }
    LatencyHistogram& operator=(const LatencyHistogram& o)
    {
        if (this != &o) {
            reset();
            merge(o);
        }
        return *this;
    }

    void record(uint64_t v) noexcept;
    // Same as record() for a histogram that only one thread ever writes
    // (readers may run concurrently): plain load/store, no atomic RMW.
    void recordSingleWriter(uint64_t v) noexcept;
    void merge(const LatencyHistogram& o) noexcept;
    void reset() noexcept;

    uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
    uint64_t min() const noexcept;
    uint64_t max() const noexcept { return max_.load(std::memory_order_relaxed); }
    double mean() const noexcept;
    // q in [0, 1]; 0 when empty.
    uint64_t quantile(double q) const noexcept;
    uint64_t p50() const noexcept { return quantile(0.50); }
    uint64_t p99() const noexcept { return quantile(0.99); }
    uint64_t p999() const noexcept { return quantile(0.999); }

    // "n=.. mean=.. p50=.. p99=.. p999=.. max=.." in the recorded unit.
    std::string summary() const;

    static int bucketOf(uint64_t v) noexcept;
    static uint64_t bucketLow(int b) noexcept;
    static uint64_t bucketHigh(int b) noexcept; // inclusive

private:
    std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
    std::atomic<uint64_t> count_{0};
    std::atomic<uint64_t> sum_{0};
    std::atomic<uint64_t> min_{UINT64_MAX};
    std::atomic<uint64_t> max_{0};
};

} // namespace npf
