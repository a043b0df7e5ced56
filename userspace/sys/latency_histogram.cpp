#include "sys/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace npf {

int LatencyHistogram::bucketOf(uint64_t v) noexcept
{
    if (v < kSub)
        return static_cast<int>(v);
    int msb = 63 - __builtin_clzll(v);
    int sub = static_cast<int>((v >> (msb - kSubBits)) & (kSub - 1));
    return kSub + (msb - kSubBits) * kSub + sub;
}

uint64_t LatencyHistogram::bucketLow(int b) noexcept
{
    if (b < kSub)
        return static_cast<uint64_t>(b);
    int msb = (b - kSub) / kSub + kSubBits;
    uint64_t sub = static_cast<uint64_t>((b - kSub) % kSub);
    return (uint64_t(kSub) + sub) << (msb - kSubBits);
}

uint64_t LatencyHistogram::bucketHigh(int b) noexcept
{
    return b + 1 < kBuckets ? bucketLow(b + 1) - 1 : UINT64_MAX;
}

void LatencyHistogram::record(uint64_t v) noexcept
{
    buckets_[bucketOf(v)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(v, std::memory_order_relaxed);
    uint64_t m = min_.load(std::memory_order_relaxed);
    while (v < m && !min_.compare_exchange_weak(m, v, std::memory_order_relaxed)) {
    }
    m = max_.load(std::memory_order_relaxed);
    while (v > m && !max_.compare_exchange_weak(m, v, std::memory_order_relaxed)) {
    }
}

void LatencyHistogram::recordSingleWriter(uint64_t v) noexcept
{
    auto bump = [](std::atomic<uint64_t>& a, uint64_t d) {
        a.store(a.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    };
    bump(buckets_[bucketOf(v)], 1);
    bump(count_, 1);
    bump(sum_, v);
    if (v < min_.load(std::memory_order_relaxed))
        min_.store(v, std::memory_order_relaxed);
    if (v > max_.load(std::memory_order_relaxed))
        max_.store(v, std::memory_order_relaxed);
}

void LatencyHistogram::merge(const LatencyHistogram& o) noexcept
{
    for (int b = 0; b < kBuckets; ++b)
        buckets_[b].fetch_add(o.buckets_[b].load(std::memory_order_relaxed), std::memory_order_relaxed);
    count_.fetch_add(o.count(), std::memory_order_relaxed);
    sum_.fetch_add(o.sum_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    uint64_t v = o.min_.load(std::memory_order_relaxed);
    uint64_t m = min_.load(std::memory_order_relaxed);
    while (v < m && !min_.compare_exchange_weak(m, v, std::memory_order_relaxed)) {
    }
    v = o.max();
    m = max_.load(std::memory_order_relaxed);
    while (v > m && !max_.compare_exchange_weak(m, v, std::memory_order_relaxed)) {
    }
}

void LatencyHistogram::reset() noexcept
{
    for (auto& b : buckets_)
        b.store(0, std::memory_order_relaxed);
    count_.store(0, std::memory_order_relaxed);
    sum_.store(0, std::memory_order_relaxed);
    min_.store(UINT64_MAX, std::memory_order_relaxed);
    max_.store(0, std::memory_order_relaxed);
}

uint64_t LatencyHistogram::min() const noexcept
{
    uint64_t m = min_.load(std::memory_order_relaxed);
    return m == UINT64_MAX ? 0 : m;
}

double LatencyHistogram::mean() const noexcept
{
    uint64_t n = count();
    return n ? static_cast<double>(sum_.load(std::memory_order_relaxed)) / static_cast<double>(n) : 0.0;
}

uint64_t LatencyHistogram::quantile(double q) const noexcept
{
    uint64_t n = count();
    if (!n)
        return 0;
    q = std::clamp(q, 0.0, 1.0);
    uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(n))));
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
        seen += buckets_[b].load(std::memory_order_relaxed);
        if (seen >= rank) {
            uint64_t lo = bucketLow(b), hi = bucketHigh(b);
            uint64_t mid = lo + (hi - lo) / 2;
            return std::clamp(mid, min(), max());
        }
    }
    return max();
}

std::string LatencyHistogram::summary() const
{
    char buf[160];
    std::snprintf(buf, sizeof buf, "n=%llu mean=%.0f p50=%llu p99=%llu p999=%llu max=%llu",
                  static_cast<unsigned long long>(count()), mean(), static_cast<unsigned long long>(p50()),
                  static_cast<unsigned long long>(p99()), static_cast<unsigned long long>(p999()),
                  static_cast<unsigned long long>(max()));
    return buf;
}

} // namespace npf
