// JSON forms of control-plane state (npfctl --json; the service reuses them).
// Key order is stable (ordered_json) so diffs and scripts stay readable.
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "ctl/flows.h"
#include "ctl/stats.h"
#include "ctl/status.h"

namespace npf::ctl {

using Json = nlohmann::ordered_json;

// {"interface", "ifindex", "state", "mode", "prog_id", "flows", "queues",
//  "region_pages", "bound_queues": [..], "xsk_slots": [{slot, queue, role}],
//  "sockets": [{inode, queue, umem_id, uid}] (sock_diag),
//  "foreign_programs": [{id, name, mode}], "problem"?}
Json toJson(const InstanceStatus& s);

// {"id", "port", "addr" (null = any), "family" (0/4/6), "posted", "consumed"}
Json toJson(const FlowInfo& f);
Json toJson(const std::vector<FlowInfo>& flows);

// {"<group>": {"<name>": value, ...}, ...}
Json toJson(const Counters& c);

} // namespace npf::ctl
