#include "meter.h"

#include <algorithm>
#include <cstring>

#include "bench_abi.h"

namespace npf::bench {

std::vector<std::pair<uint64_t, double>> latencyCdf(const LatencyHistogram& h)
{
    // The histogram shows quantiles only: quantile((r - 0.5) / n) lies in the
    // bucket of the r-th smallest sample, so the last rank of each bucket is
    // found by bisection (ranks only grow with the bucket).
    std::vector<std::pair<uint64_t, double>> out;
    const uint64_t n = h.count();
    auto bucketOfRank = [&](uint64_t r) {
        return LatencyHistogram::bucketOf(h.quantile((double(r) - 0.5) / double(n)));
    };
    for (uint64_t r = 1; r <= n;) {
        const int b = bucketOfRank(r);
        uint64_t lo = r, hi = n; // the bucket's last rank is in [lo, hi]
        while (lo < hi) {
            const uint64_t mid = lo + (hi - lo + 1) / 2;
            if (bucketOfRank(mid) == b)
                lo = mid;
            else
                hi = mid - 1;
        }
        out.emplace_back(std::min(LatencyHistogram::bucketHigh(b), h.max()), double(lo) / double(n));
        r = lo + 1;
    }
    return out;
}

Meter::Meter(uint64_t t0Ns, double seconds, uint64_t payloadLen)
    : t0_(t0Ns), len_(payloadLen), nbins_(size_t(seconds * 1000) + 1)
{
    bins_ = std::make_unique<std::atomic<uint32_t>[]>(nbins_);
    for (size_t i = 0; i < nbins_; i++)
        bins_[i].store(0, std::memory_order_relaxed);
}

bool Meter::onPayload(const uint8_t* p, uint32_t len, uint64_t nowNs) noexcept
{
    npfb_hdr h;
    if (len != len_ || len < sizeof(h)) {
        bad_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    std::memcpy(&h, p, sizeof(h));
    bool ok = h.magic == NPFB_MAGIC && p[len - 1] == npfb_pattern(len - 1);
    if (ok && (checked_++ & 63) == 0)
        for (uint32_t i = sizeof(h); i < len; i++)
            ok &= p[i] == npfb_pattern(i);
    if (!ok) {
        bad_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    if (nowNs > h.tstamp)
        lat_.recordSingleWriter(nowNs - h.tstamp);
    return true;
}

void Meter::count(uint32_t n, uint64_t bytes, uint64_t nowNs) noexcept
{
    if (nowNs >= t0_) {
        size_t b = size_t((nowNs - t0_) / 1000000);
        if (b < nbins_)
            bins_[b].fetch_add(n, std::memory_order_relaxed);
    }
    packets_.fetch_add(n, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

std::vector<uint32_t> Meter::bins() const
{
    std::vector<uint32_t> v(nbins_);
    for (size_t i = 0; i < nbins_; i++)
        v[i] = bins_[i].load(std::memory_order_relaxed);
    return v;
}

} // namespace npf::bench
