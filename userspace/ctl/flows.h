// Flow table of a running instance: UDP destination (port, optional address)
// -> flow id, and the flow's post ring cursors.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "npf/abi.h"

namespace npf::ctl {

class Dataplane;

struct FlowSpec {
    uint16_t port = 0;                // host byte order, 1..65535
    uint8_t family = NPF_FAMILY_ANY;  // NPF_FAMILY_ANY / _IPV4 / _IPV6
    std::array<uint8_t, 16> addr{};   // IPv4 in addr[0..3]
    bool operator==(const FlowSpec&) const = default;
};

// "1".."65535" (decimal digits only); throws ArgumentError.
uint16_t parsePort(const std::string& s);
// Port plus an optional IPv4/IPv6 destination ("" = any address); throws ArgumentError.
FlowSpec parseFlowSpec(const std::string& port, const std::string& addr = "");

// The address as text, "" for any.
std::string addrString(const FlowSpec& f);
// "port 5000" / "198.18.0.1 port 5000" / "fd00::1 port 5000"
std::string toString(const FlowSpec& f);

npf_flow_key toKey(const FlowSpec& f);
FlowSpec fromKey(const npf_flow_key& k);

struct FlowInfo {
    uint32_t id = 0;
    FlowSpec spec;
    uint64_t prod = 0; // buffers posted
    uint64_t cons = 0; // buffers consumed by XDP (next seq)
};

// Adds the flow under the lowest free id and returns it. The id's cursors are
// reset before the flow becomes visible to XDP. Throws StateError for a
// duplicate flow (EEXIST) or when all NPF_MAX_FLOWS ids are taken (ENOSPC).
uint32_t addFlow(const Dataplane& dp, const FlowSpec& f);

// Removes the flow; StateError(ENOENT) if there is none.
void delFlow(const Dataplane& dp, const FlowSpec& f);

// All flows, by id.
std::vector<FlowInfo> listFlows(const Dataplane& dp);

} // namespace npf::ctl
