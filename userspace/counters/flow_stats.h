// One flow's accounting (npf::FlowStats) as JSON and text: what npfd sends a
// client for its own flow and `npfctl flow list` shows; the public forms
// (npf::toJson(FlowStats), npf::formatXdpOutcomes: npf/counters.h, what
// npf-recv's exit summary prints) are defined in flow_stats.cpp. Names come
// from the tables: XDP outcomes from enum npf_stat (dataplane::kStatNames),
// the rest from kFlowCounters.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "counters/counter_list.h"
#include "npf/counters.h"

namespace npf::counters {

// {"xdp": {<npf_stat name>: n, ... from NPF_STAT_FLOW_FIRST},
//  <kFlowCounters name>: n, ...,
//  "reached", "passed", "dropped_in_xdp", "claimed", "socket_dropped": the
//  identity's terms (derived; parseFlowStats ignores them)}
Json flowStatsJson(const FlowStats& s);

// The counters of such an object. Strict: a missing key, or one that is not
// an unsigned number, throws std::invalid_argument naming it (npfd's reply
// to a client is checked, not trusted).
FlowStats parseFlowStats(const Json& j);

// The flow's XDP outcomes `which` picks, by name, in enum order: passed
// (kFlowPassed), dropped (before or after the claim: kFlowDroppedBeforeClaim
// and kFlowLostAfterClaim) or all.
enum class FlowOutcomes { Passed, Dropped, All };
std::vector<std::pair<const char*, uint64_t>> flowOutcomes(const FlowStats& s, FlowOutcomes which);
// Those that are not 0, "drop_rnr=3 redir_primary=9" ("" when none).
std::string formatFlowXdp(const FlowStats& s, FlowOutcomes which);

} // namespace npf::counters
