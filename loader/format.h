// Text and JSON output of npfctl: fixed columns a script can parse, "-" for empty.
#pragma once

#include <string>
#include <vector>

#include "cli/json.h"
#include "dataplane/attach.h"
#include "dataplane/flows.h"
#include "dataplane/status.h"

namespace npf::cli {

// "1.0 GiB", "512 KiB", ...
std::string humanBytes(uint64_t bytes);

// One line: what attach did.
std::string attachSummary(const dataplane::AttachResult& r);

// Header + one row per instance:
// INTERFACE STATE MODE PROG_ID FLOWS QUEUES BOUND_QUEUES REGION_PAGES
std::string statusTable(const std::vector<dataplane::InstanceStatus>& rows);

// Header + one row per flow: ID PORT ADDR POSTED CONSUMED REACHED CLAIMED
// DROPPED PASSED CREDITS HELD ("*" = any address; REACHED..PASSED:
// cli::FlowSums; CREDITS, HELD: the engine's credits_sent, credit_waits,
// "-" unless a live engine serves the flow with credits).
std::string flowTable(const std::vector<FlowRow>& rows);

// Per-second rates of cur - prev over `seconds`, aligned with cur.
std::vector<double> rates(const counters::Counters& prev, const counters::Counters& cur, double seconds);

// Header + one row per counter: COUNTER VALUE [RATE/S]; names are group.name.
std::string counterTable(const counters::Counters& c, const std::vector<double>* perSecond = nullptr);

// {"interface", "prog_id", "mode", "counters": {...}, "rates"?: {...}, "interval"?}
Json statsJson(const std::string& ifname, uint32_t progId, const std::string& mode, const counters::Counters& c,
               const std::vector<double>* perSecond = nullptr, double interval = 0);

} // namespace npf::cli
