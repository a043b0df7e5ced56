// Counters as npf shows them: named rows in groups ("xdp": the npf_stats
// map; "engine" and "latency": the engine's snapshot, engine_stats.h), what
// `npfctl stats` prints and writes as JSON; and Json, the type of npf's JSON
// output, whose key order is kept (ordered_json) so diffs and scripts stay
// readable.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/stats.h"

namespace npf::counters {

using Json = nlohmann::ordered_json;

struct Counter {
    std::string group; // "xdp" for npf_stats
    std::string name;
    uint64_t value = 0;
};
using Counters = std::vector<Counter>;

// XDP counters as group "xdp", in enum order.
Counters xdpCounters(const dataplane::XdpStats& s);

} // namespace npf::counters
