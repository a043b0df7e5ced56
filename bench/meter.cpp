#include "meter.h"

#include <cstring>

#include "bench_abi.h"

namespace npf::bench {

int LatHist::index(uint64_t ns) noexcept
{
    if (ns < kSub)
        return int(ns);
    const int msb = 63 - __builtin_clzll(ns);
    const int sub = int((ns >> (msb - 4)) & (kSub - 1));
    const int idx = (msb - 3) * kSub + sub;
    return idx < kBuckets ? idx : kBuckets - 1;
}

uint64_t LatHist::upper(int idx) noexcept
{
    if (idx < kSub)
        return uint64_t(idx);
    const int msb = idx / kSub + 3;
    const uint64_t sub = uint64_t(idx % kSub);
    return ((kSub + sub + 1) << (msb - 4)) - 1;
}

uint64_t LatHist::quantile(double q) const noexcept
{
    if (n_ == 0)
        return 0;
    const uint64_t want = uint64_t(q * double(n_ - 1)) + 1;
    uint64_t acc = 0;
    for (int i = 0; i < kBuckets; i++) {
        acc += counts_[size_t(i)];
        if (acc >= want)
            return upper(i);
    }
    return upper(kBuckets - 1);
}

std::vector<std::pair<uint64_t, double>> LatHist::cdf() const
{
    std::vector<std::pair<uint64_t, double>> out;
    uint64_t acc = 0;
    for (int i = 0; i < kBuckets; i++) {
        if (!counts_[size_t(i)])
            continue;
        acc += counts_[size_t(i)];
        out.emplace_back(upper(i), double(acc) / double(n_));
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
    if (h.seq > maxSeq_)
        maxSeq_ = h.seq;
    if (nowNs > h.tstamp)
        lat_.record(nowNs - h.tstamp);
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
