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

// Names of enum npf_stat, in enum order.
inline constexpr const char* kStatNames[] = {
    "rx_total",
    "pass_not_ip",
    "pass_not_udp",
    "pass_fragment",
    "pass_ipv6_ext",
    "pass_malformed",
    "pass_no_flow",
    "pass_bad_flow",
    "pass_bad_queue",
    "pass_no_socket",
    "pass_too_big",
    "pass_meta_fail",
    "drop_rnr",
    "drop_bad_desc",
    "drop_contended",
    "drop_csum",
    "redir_primary",
    "redir_backup",
    "redir_fail",
    "truncated",
};
static_assert(std::size(kStatNames) == NPF_STAT_MAX, "kStatNames must name every enum npf_stat, in order");

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
