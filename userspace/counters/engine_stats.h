// The engine's counters in JSON and as rows, all from the tables of
// npf/counters.h: the snapshot a running npf::Engine writes every 500 ms to
// engineStatsPath(ifname) and what `npfctl stats` reads back. The public
// forms (npf::toJson(EngineStats), npf::formatCounters: npf/counters.h) are
// defined in engine_stats.cpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "counters/counter_list.h"
#include "npf/counters.h"
#include "region/region_stats.h"

namespace npf::counters {

// /run/npf/netns-<inode>/<ifname>/engine.json
std::string engineStatsPath(const std::string& ifname);

// {"interface", "pid", "time_ns",
//  "counters": {<kEngineCounters name>: n, ...},
//  "latency": {<kEngineLatencies name>: {"count", "p50_ns", "p99_ns", "p999_ns", "max_ns"}, ...}}
Json engineStatsJson(const EngineStats& s, const std::string& ifname, pid_t pid, uint64_t timeNs);

// Adds the counters of the regions behind those stats as member "region":
// {<kRegionCounters name>: n, ...}.
void addRegionStats(Json& j, const RegionStats& r);

// One flow the engine serves, as its snapshot lists it under "flows":
// {"id", "gen", "credits": whether it grants credits, "stats": flowStatsJson}.
struct EngineFlow {
    uint32_t id = 0, gen = 0; // the flow's id and that id's generation (npf_flow.gen)
    bool credits = false;
    FlowStats stats;
};
Json engineFlowJson(const EngineFlow& f);

// The counters and latencies of such an object; a key that is missing or
// not an unsigned number reads as 0.
EngineStats parseEngineStats(const Json& j);

// Counters of the engine serving `ifname` as group "engine" (its latency
// quantiles as group "latency", e.g. fault_total_p99_ns; its regions'
// counters as group "region"), in table order;
// keys the snapshot lacks are left out. Empty when no live engine wrote a
// snapshot (missing file, or its pid is gone).
Counters engineCounters(const std::string& ifname);

// The flows of the live engine serving `ifname` (its snapshot's "flows";
// a malformed entry is left out), and that engine's pid; nullopt when no
// live engine wrote a snapshot.
struct EngineFlows {
    pid_t pid = 0;
    std::vector<EngineFlow> flows;
};
std::optional<EngineFlows> engineFlows(const std::string& ifname);

// The named counters of `s`, in the order given, as JSON members of `out` (an
// object; as text: npf::formatCounters, npf/counters.h).
using EngineCounter = uint64_t EngineStats::*;
void addCounters(Json& out, const EngineStats& s, std::initializer_list<EngineCounter> which);

} // namespace npf::counters
