// The engine's counters as one struct (npf::Engine::stats(), npf::Client's
// stats, the JSON snapshot `npfctl stats` reads). Its own header so that the
// counter tables (npf/counters.h) need nothing else of the public API.
#pragma once

#include <cstdint>

namespace npf {

// Counters of the whole engine. Names, units and help of every field are in
// npf/counters.h (kEngineCounters, kEngineLatencies), the one place that
// defines them: a field added here fails to compile until it is listed there.
struct EngineStats {
    uint64_t fastPath = 0, faultPath = 0, deferred = 0, badMeta = 0, rejected = 0, mismatch = 0;
    uint64_t placeErrors = 0, csumErrors = 0, late = 0, faultDrops = 0, deferDrops = 0;
    uint64_t completedOk = 0, completedTruncated = 0, completedLost = 0, completedBadCsum = 0;
    uint64_t cpuFaults = 0, packetFaults = 0, prefetched = 0, evicted = 0, restored = 0;
    uint64_t residentPages = 0, pinnedBytes = 0; // gauges
    uint64_t kernelRxDropped = 0;
    // ns from one stage of a datagram to the next: p50/p99/p999/max.
    struct Latency {
        uint64_t count = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
        bool operator==(const Latency&) const = default;
    };
    Latency steerToPickup, pickupToImage, imageToCopy, copyToPublish, faultTotal, fastTotal;
    bool operator==(const EngineStats&) const = default;
};

} // namespace npf
