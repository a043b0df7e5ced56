// JSON forms of control-plane state (npfctl --json), in npf's JSON type
// (counters::Json: key order is kept, so diffs and scripts stay readable).
#pragma once

#include <vector>

#include "counters/counter_list.h"
#include "dataplane/flows.h"
#include "dataplane/status.h"

namespace npf::cli {

using counters::Json;

// {"interface", "ifindex", "state", "mode", "prog_id", "flows", "queues",
//  "region_pages", "bound_queues": [..], "xsk_slots": [{slot, queue, role}],
//  "sockets": [{inode, queue, umem_id, uid}] (sock_diag),
//  "foreign_programs": [{id, name, mode}], "problem"?}
Json toJson(const dataplane::InstanceStatus& s);

// {"id", "port", "addr" (null = any), "family" (0/4/6), "posted", "consumed"}
Json toJson(const dataplane::FlowInfo& f);
Json toJson(const std::vector<dataplane::FlowInfo>& flows);

// {"<group>": {"<name>": value, ...}, ...}
Json toJson(const counters::Counters& c);

} // namespace npf::cli
