// What the engine's parts add to EngineStats besides the threads' tallies:
// the completions of a set of flows (their sequencers) and a region's
// counters. Service::stats (every flow and region of an interface) and
// npfd's per-client stats both use these, so the two cannot disagree.
#pragma once

#include <cstdint>

#include "npf/stats.h"
#include "order/sequencer.h"
#include "region/region_stats.h"

namespace npf {

// The sequencers' published completions, by status, and late arrivals: the
// same fields of EngineStats and FlowStats (the one mapping of them).
template <typename Stats>
void addCompletions(Stats& s, const SequencerStats& q) noexcept
{
    s.completedOk += q.ok;
    s.completedTruncated += q.truncated;
    s.completedLost += q.lost;
    s.completedBadCsum += q.badCsum;
    s.late += q.stale;
}
// `pageSize`: the region's; resident pages count in 4 KiB pages.
void addRegionCounters(EngineStats& s, const RegionStats& r, uint64_t pageSize) noexcept;

} // namespace npf
