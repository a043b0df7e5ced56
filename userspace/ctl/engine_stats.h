// The service's userspace counters as `npfctl stats` shows them: a running
// npf::Engine writes a JSON snapshot to engineStatsPath(ifname) every 500 ms.
#pragma once

#include <string>

#include "ctl/stats.h"

namespace npf::ctl {

// /run/npf/<ifname>/engine.json
std::string engineStatsPath(const std::string& ifname);

// Counters of the engine serving `ifname` as group "engine" (and its latency
// quantiles as group "latency", e.g. fault_total_p99_ns); empty when no live
// engine wrote a snapshot (missing file, or its pid is gone).
Counters engineCounters(const std::string& ifname);

} // namespace npf::ctl
