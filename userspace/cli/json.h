// JSON forms of control-plane state (npfctl --json), in npf's JSON type
// (counters::Json: key order is kept, so diffs and scripts stay readable).
#pragma once

#include <optional>
#include <vector>

#include "counters/counter_list.h"
#include "counters/engine_stats.h"
#include "dataplane/flows.h"
#include "dataplane/status.h"

namespace npf::cli {

using counters::Json;

// {"interface", "ifindex", "state", "mode", "prog_id", "flows", "queues",
//  "region_pages", "bound_queues": [..], "xsk_slots": [{slot, queue, role}],
//  "sockets": [{inode, queue, umem_id, uid}] (sock_diag),
//  "foreign_programs": [{id, name, mode}], "problem"?}
Json toJson(const dataplane::InstanceStatus& s);

// A flow's XDP outcomes (FlowInfo::xdp) summed as `npfctl flow list` shows
// them, in npf::FlowStats's terms (npf/stats.h):
//   reached  every outcome of the flow's datagrams
//   claimed  took a posted buffer: redir_primary, redir_backup, redir_fail, drop_bad_desc
//   dropped  lost in XDP, before or after a claim: drop_rnr, drop_bad_desc,
//            drop_contended, drop_csum, redir_fail
//   passed   passed to the kernel untouched: pass_bad_queue, pass_no_socket,
//            pass_too_big, pass_meta_fail
// (claimed and dropped share drop_bad_desc and redir_fail: a buffer taken,
// the datagram lost; its seq completes LOST.)
struct FlowSums {
    uint64_t reached = 0, claimed = 0, dropped = 0, passed = 0;
};
FlowSums flowSums(const dataplane::FlowXdpStats& x);

// {"id", "port", "addr" (null = any), "family" (0/4/6), "posted", "consumed",
//  "reached", "claimed", "dropped", "passed" (FlowSums),
//  "xdp": {<npf_stat name>: n, ... every outcome from NPF_STAT_FLOW_FIRST on, and truncated}}
Json toJson(const dataplane::FlowInfo& f);
Json toJson(const std::vector<dataplane::FlowInfo>& flows);

// A flow as `npfctl flow list` shows it: XDP's view (the maps) and, while a
// live engine serves it, the engine's (its snapshot: same id, same
// generation).
struct FlowRow {
    FlowRow(const dataplane::FlowInfo& x, std::optional<counters::EngineFlow> e = std::nullopt) : xdp(x), engine(e) {}
    dataplane::FlowInfo xdp;
    std::optional<counters::EngineFlow> engine;
};
std::vector<FlowRow> flowRows(const std::vector<dataplane::FlowInfo>& flows,
                              const std::optional<counters::EngineFlows>& engine);

// toJson(row.xdp) and "engine": null, or {"credits": whether it grants
// credits, <kFlowCounters name>: n, ...}.
Json toJson(const FlowRow& r);
Json toJson(const std::vector<FlowRow>& rows);

// {"<group>": {"<name>": value, ...}, ...}
Json toJson(const counters::Counters& c);

} // namespace npf::cli
