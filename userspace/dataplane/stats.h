// XDP counters of a running instance: the per-CPU npf_stats map, summed, and
// the names of its entries. (As rows of `npfctl stats`, beside the engine's:
// counters/counter_list.h.)
#pragma once

#include <array>
#include <cstdint>
#include <iterator>

#include "npf/abi.h"

namespace npf::dataplane {

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

} // namespace npf::dataplane
