// What every receiver reports while it runs: packets and bytes, payloads
// that failed verification, received packets per 1 ms bin since t0, and a
// histogram of one-way latency (generator timestamp -> application sees the
// bytes). One writer (the receiving thread); anyone may read the atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sys/clock.h"
#include "sys/latency_histogram.h"

namespace npf::bench {

// (ns, cumulative fraction) at the top of every non-empty bucket of h: the
// fraction of samples at or below ns. h must not be written meanwhile.
std::vector<std::pair<uint64_t, double>> latencyCdf(const LatencyHistogram& h);

class Meter {
public:
    // bins of 1 ms covering `seconds` from t0.
    Meter(uint64_t t0Ns, double seconds, uint64_t payloadLen);

    // Verifies one payload (header every time, the whole pattern on one in
    // 64) and records its latency. Returns false if it is not what the
    // generator sent.
    bool onPayload(const uint8_t* p, uint32_t len, uint64_t nowNs) noexcept;
    // Adds n received packets to the bin of nowNs and the totals.
    void count(uint32_t n, uint64_t bytes, uint64_t nowNs) noexcept;
    void lost(uint64_t n) noexcept { lost_.fetch_add(n, std::memory_order_relaxed); }
    // n datagrams the receiver refused as corrupt (npf: failed UDP checksum): counted as bad.
    void rejected(uint64_t n) noexcept { bad_.fetch_add(n, std::memory_order_relaxed); }

    uint64_t packets() const noexcept { return packets_.load(std::memory_order_relaxed); }
    uint64_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }
    uint64_t bad() const noexcept { return bad_.load(std::memory_order_relaxed); }
    uint64_t lostReported() const noexcept { return lost_.load(std::memory_order_relaxed); }
    uint64_t t0() const noexcept { return t0_; }
    // Snapshot of the 1 ms bins.
    std::vector<uint32_t> bins() const;
    const LatencyHistogram& latency() const noexcept { return lat_; }

private:
    uint64_t t0_, len_;
    std::unique_ptr<std::atomic<uint32_t>[]> bins_;
    size_t nbins_;
    std::atomic<uint64_t> packets_{0}, bytes_{0}, bad_{0}, lost_{0};
    uint64_t checked_ = 0;
    LatencyHistogram lat_;
};

} // namespace npf::bench
