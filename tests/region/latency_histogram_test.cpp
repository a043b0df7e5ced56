#include <gtest/gtest.h>

#include <random>

#include "sys/latency_histogram.h"

namespace npf {
namespace {

TEST(LatencyHistogram, BucketsCoverEveryValueContiguously)
{
    for (int b = 0; b + 1 < LatencyHistogram::kBuckets; ++b) {
        EXPECT_EQ(LatencyHistogram::bucketHigh(b) + 1, LatencyHistogram::bucketLow(b + 1)) << b;
        EXPECT_EQ(LatencyHistogram::bucketOf(LatencyHistogram::bucketLow(b)), b);
        EXPECT_EQ(LatencyHistogram::bucketOf(LatencyHistogram::bucketHigh(b)), b);
    }
    EXPECT_EQ(LatencyHistogram::bucketOf(UINT64_MAX), LatencyHistogram::kBuckets - 1);
    // at most 1/kSub wide above the exact range (6.25 %)
    for (int b = LatencyHistogram::kSub; b + 1 < LatencyHistogram::kBuckets; ++b) {
        double lo = double(LatencyHistogram::bucketLow(b)), hi = double(LatencyHistogram::bucketHigh(b));
        EXPECT_LE((hi - lo + 1) / lo, 1.0 / LatencyHistogram::kSub + 1e-9) << b;
    }
}

TEST(LatencyHistogram, QuantilesWithinBucketError)
{
    LatencyHistogram h;
    EXPECT_EQ(h.p50(), 0u);
    // 1..100000 uniformly: p50 = 50000, p99 = 99000, p999 = 99900
    for (uint64_t v = 1; v <= 100000; ++v)
        h.record(v);
    EXPECT_EQ(h.count(), 100000u);
    EXPECT_EQ(h.min(), 1u);
    EXPECT_EQ(h.max(), 100000u);
    EXPECT_NEAR(h.mean(), 50000.5, 0.01);
    EXPECT_NEAR(double(h.p50()), 50000, 50000 * 0.13);
    EXPECT_NEAR(double(h.p99()), 99000, 99000 * 0.13);
    EXPECT_NEAR(double(h.p999()), 99900, 99900 * 0.13);
    EXPECT_LE(h.quantile(1.0), 100000u);
}

TEST(LatencyHistogram, TailIsSeenAndMergeAdds)
{
    LatencyHistogram a, b;
    for (int i = 0; i < 990; ++i)
        a.record(1000);
    for (int i = 0; i < 10; ++i)
        b.record(1000000);
    a.merge(b);
    EXPECT_EQ(a.count(), 1000u);
    EXPECT_NEAR(double(a.p50()), 1000, 130);
    EXPECT_NEAR(double(a.p999()), 1000000, 130000);
    EXPECT_EQ(a.max(), 1000000u);
    LatencyHistogram c = a;
    EXPECT_EQ(c.count(), 1000u);
    c.reset();
    EXPECT_EQ(c.count(), 0u);
    EXPECT_EQ(c.max(), 0u);
}

} // namespace
} // namespace npf
