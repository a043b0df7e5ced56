// Counters of a running instance. XDP counters come from the per-CPU
// npf_stats map; other sources (the service's userspace counters) add their
// own groups to the same Counters list.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "npf/abi.h"

namespace npf::ctl {

class Dataplane;

// Names and help lines of enum npf_stat, in enum order: from NPF_STATS (npf/abi.h).
#define NPF_STAT_NAME(id, name, help) name,
inline constexpr const char* kStatNames[] = {NPF_STATS(NPF_STAT_NAME)};
#undef NPF_STAT_NAME
#define NPF_STAT_HELP(id, name, help) help,
inline constexpr const char* kStatHelp[] = {NPF_STATS(NPF_STAT_HELP)};
#undef NPF_STAT_HELP
static_assert(std::size(kStatNames) == NPF_STAT_MAX && std::size(kStatHelp) == NPF_STAT_MAX);

// "PASS" for XDP_PASS, ... (an XDP program's verdict), "?" for another value.
const char* xdpVerdictName(int verdict);

using XdpStats = std::array<uint64_t, NPF_STAT_MAX>;

// npf_stats summed over all possible CPUs.
XdpStats readXdpStats(const Dataplane& dp);

struct Counter {
    std::string group; // "xdp" for npf_stats
    std::string name;
    uint64_t value = 0;
};
using Counters = std::vector<Counter>;

// XDP counters as group "xdp", in enum order.
Counters xdpCounters(const XdpStats& s);

} // namespace npf::ctl
