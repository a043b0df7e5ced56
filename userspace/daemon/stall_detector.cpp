#include "daemon/stall_detector.h"

#include <cstdio>

namespace npf::daemon {

std::string formatSeconds(uint64_t ns)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f s", double(ns) / 1e9);
    return buf;
}

std::string StallDetector::observe(const std::vector<LoopProgress>& loops, uint64_t nowNs)
{
    std::map<std::string, Seen> next;
    std::string stalled;
    for (const LoopProgress& l : loops) {
        Seen s{l.rounds, nowNs};
        if (auto it = seen_.find(l.name); it != seen_.end() && it->second.rounds == l.rounds)
            s.sinceNs = it->second.sinceNs;
        const uint64_t still = nowNs - s.sinceNs;
        if (still > uint64_t(limit_.count()))
            stalled += (stalled.empty() ? "" : "; ") + l.name + ": no progress for " + formatSeconds(still);
        next.emplace(l.name, s);
    }
    seen_ = std::move(next);
    return stalled;
}

} // namespace npf::daemon
