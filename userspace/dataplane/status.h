// What npf looks like on the interfaces of this network namespace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/chain.h"
#include "dataplane/mode.h"
#include "dataplane/xdp_state.h"
#include "dataplane/xsk_diag.h"
#include "dataplane/xsk_slots.h"

namespace npf::dataplane {

enum class InstanceState {
    None,     // no npf program, no pins
    Attached, // npf_xdp attached
    Stale,    // pins left without a program
    Gone,     // pins of an interface that no longer exists (npfctl detach --force IF)
};

const char* toString(InstanceState s);

struct InstanceStatus {
    std::string ifname;
    int ifindex = 0;
    InstanceState state = InstanceState::None;
    std::optional<AttachMode> mode;
    uint32_t progId = 0;
    uint32_t flows = 0;
    uint32_t queues = 0;      // socket slots the program was loaded for
    uint32_t regions = 0;     // distinct regions bound to flows (engines, npfd clients)
    std::vector<XskSlot> slots;        // npf_xsks slots holding a socket
    std::vector<uint32_t> boundQueues; // queues with a socket in npf_xsks
    std::vector<XdpSocket> sockets;    // AF_XDP sockets bound to the interface (sock_diag; empty
                                       // if the kernel lacks CONFIG_XDP_SOCKETS_DIAG)
    std::vector<XdpProgram> foreign;   // other XDP programs on the interface
    std::optional<ChainedProgram> chained; // the program behind npf_xdp (npfctl attach --then)
    std::string problem;               // why some fields are unknown, "" if none
};

// Status of one interface; ENODEV if it does not exist here.
InstanceStatus instanceStatus(const std::string& ifname);

// Interfaces of this namespace with an npf program or npf pins, by ifindex.
std::vector<InstanceStatus> allInstances();

} // namespace npf::dataplane
