// Which of npfd's loops have stopped making progress (the liveness of
// /healthz, health.h). Each loop -- the control loop, every worker and
// pager -- bumps a counter once per round, and every one of them comes
// round at least every 500 ms while it is well (its longest wait); a loop
// whose counter has not moved for longer than the limit is stuck: in a
// system call that does not return, a deadlock, an endless loop.
//
// The detector sees the counters only when it is shown them (a probe): a
// value first seen at t counts as new at t, so a stall is never reported
// as longer than it is, and it is noticed by the first observation more
// than `limit` after the loop's last round (probes every 10 s and a 10 s
// limit: within 20 s).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sys/round_counter.h"

namespace npf::daemon {

class StallDetector {
public:
    explicit StallDetector(std::chrono::nanoseconds limit) : limit_(limit) {}

    // One look at every loop at `nowNs` (monotonic): the stalled ones, "; "
    // between them ("eth0 npf-worker-0: no progress for 12.3 s"), or "".
    // A loop not among `loops` any more is forgotten.
    std::string observe(const std::vector<LoopProgress>& loops, uint64_t nowNs);
    std::chrono::nanoseconds limit() const noexcept { return limit_; }

private:
    struct Seen {
        uint64_t rounds = 0;
        uint64_t sinceNs = 0; // when `rounds` was first seen
    };
    std::chrono::nanoseconds limit_;
    std::map<std::string, Seen> seen_;
};

// "12.3 s"
std::string formatSeconds(uint64_t ns);

} // namespace npf::daemon
