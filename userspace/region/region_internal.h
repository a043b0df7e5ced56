// Internals shared by the region's parts: its counters, allocation that
// cannot throw.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <new>

namespace npf {

// A region's monotonic counters (kRegionCounters says what each counts).
struct RegionCounters {
    std::atomic<uint64_t> packetBatches{0}, patches{0}, patchBytes{0}, patchesToResident{0};
    std::atomic<uint64_t> packetFaults{0}, cpuFaults{0}, cpuFaultWakes{0}, pagesInstalled{0};
    std::atomic<uint64_t> copyCalls{0}, eexist{0}, prefetched{0}, evicted{0}, spilled{0};
    std::atomic<uint64_t> discarded{0}, restored{0}, evictBlocked{0}, graceWaits{0}, errors{0};
    std::atomic<uint64_t> vanished{0}, clientFaults{0}, clientIgnored{0}, clientGone{0};
};

inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) noexcept
{
    c.fetch_add(n, std::memory_order_relaxed);
}

// Grows v to n elements without throwing; false on allocation failure.
template <typename V>
bool ensureSize(V& v, size_t n) noexcept
{
    try {
        v.resize(n);
        return true;
    } catch (const std::bad_alloc&) {
        return false;
    }
}

template <typename V, typename T>
bool pushBack(V& v, const T& x) noexcept
{
    try {
        v.push_back(x);
        return true;
    } catch (const std::bad_alloc&) {
        return false;
    }
}

} // namespace npf
