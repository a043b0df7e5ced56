// A loop's round counter, the liveness signal of a thread (npfd's /healthz:
// daemon/stall_detector.h): its thread bumps it once per round, any thread
// reads it. Relaxed: it orders nothing, and costs the loop one plain store.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace npf {

class RoundCounter {
public:
    void bump() noexcept { n_.store(n_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
    uint64_t load() const noexcept { return n_.load(std::memory_order_relaxed); }

private:
    std::atomic<uint64_t> n_{0};
};

// A loop, by name, and its counter as read.
struct LoopProgress {
    std::string name; // "control loop", "eth0 npf-worker-0"
    uint64_t rounds = 0;
};

} // namespace npf
