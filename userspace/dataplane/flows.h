// Flow table of a running instance: UDP destination (port, optional address)
// -> flow id, and the flow's post ring cursors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/flow_ring.h"
#include "dataplane/stats.h"
#include "npf/abi.h"
#include "sys/fd.h"

namespace npf::dataplane {

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
    uint32_t gen = 0;  // generation of the id (npf_flow.gen)
    // XDP's outcomes of the flow's datagrams of this generation
    // (npf_flow_stats, readFlowXdpStats; all 0 for an id out of range).
    FlowXdpStats xdp{};
};

// A flow's id and the generation of that id when the flow took it.
struct FlowEntry {
    uint32_t id = 0;
    uint32_t gen = 0;
    bool operator==(const FlowEntry&) const = default;
};

// Flow ids are allocated by every process that manages flows (npfctl, engines,
// npfd). All of them hold this lock -- flock(LOCK_EX) on the instance's pin
// directory -- from reading the table to the last write, so two flows can
// never get one id. Blocks until the lock is free; released on destruction
// (or when the process dies).
class FlowLock {
public:
    explicit FlowLock(const Dataplane& dp);

private:
    Fd fd_;
};

// Adds the flow under the lowest free id and returns it. The id gets a new
// post ring map (npf_rings[id]) under the next generation before the flow
// becomes visible to XDP; it has no region bound (its datagrams pass) until
// an engine binds one.
// Throws StateError for a duplicate flow (EEXIST) or when all NPF_MAX_FLOWS
// ids are taken (ENOSPC).
FlowEntry addFlow(const Dataplane& dp, const FlowSpec& f);

// How an engine came by its flow.
enum class FlowOrigin {
    Added,         // the engine added it (and removes it on exit)
    FromEngine,    // added by an engine that is gone: inherited, removed on exit
    FromOperator,  // added by npfctl: left in place on exit
};

struct EngineFlow {
    FlowEntry entry;
    FlowOrigin origin;
    FlowRing ring;
    // The flow's XDP outcomes when the engine took it (0 for a new flow; a
    // flow taken over keeps counting): its stats start from here.
    FlowXdpStats xdpAtOpen{};
};

// For an engine (one serves an interface at a time): the flow's entry if it
// exists, else a new one as addFlow, marked as an engine's; either way bound
// to the engine's region (npf_regions[id] and npf_flow.region_size). With
// `fresh`, an existing entry is replaced by a new one (new generation, new
// ring map): npfd gives every client a ring nobody else has mapped; an
// operator's flow (npfctl flow add) is never replaced then, nor overlapped
// (an address under the operator's wildcard on that port, or a wildcard over
// the operator's address): StateError(EBUSY), and the flow stays as it is.
EngineFlow openEngineFlow(const Dataplane& dp, const FlowSpec& f, const RegionBinding& region,
                          bool fresh = false);

// Unbinds the region of a flow the engine leaves in place (an operator's):
// its datagrams pass to the kernel until another engine binds one. Does
// nothing if the entry is no longer `expect`.
void unbindRegion(const Dataplane& dp, const FlowSpec& f, FlowEntry expect);

// Removes the flow (and its region binding); StateError(ENOENT) if there is none. With `expect`, only
// if the entry is still that one (StateError(ESTALE) otherwise: the flow was
// deleted and added again by someone else). Returns once no XDP run can still
// use the entry (an RCU grace period), so the id is safe to reuse.
void delFlow(const Dataplane& dp, const FlowSpec& f, std::optional<FlowEntry> expect = std::nullopt);

// All flows, by id.
std::vector<FlowInfo> listFlows(const Dataplane& dp);

} // namespace npf::dataplane
