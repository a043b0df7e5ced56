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

// One flow's outcomes: index s - NPF_STAT_FLOW_FIRST for enum npf_stat s.
using FlowXdpStats = std::array<uint64_t, NPF_FLOW_STAT_MAX>;

// The outcomes of flow `id`'s datagrams of generation `gen`, summed over the
// CPUs whose entry is of that generation (npf_flow_stats).
FlowXdpStats readFlowXdpStats(const Dataplane& dp, uint32_t id, uint32_t gen);

// Zeroes flow `id`'s entry on every CPU and gives it generation `gen`: done
// when the id is handed to a new flow, before XDP can find it (the caller
// holds the flow lock).
void resetFlowXdpStats(const Dataplane& dp, uint32_t id, uint32_t gen);

// The generation flow `id` was last handed out under (0: never), as
// resetFlowXdpStats left it (XDP never writes it).
uint32_t flowGeneration(const Dataplane& dp, uint32_t id);

} // namespace npf::dataplane
