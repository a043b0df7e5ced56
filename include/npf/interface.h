// Network interfaces as libnpf sees them: in the calling thread's network
// namespace, by name.
#pragma once

#include <cstdint>
#include <string>

namespace npf {

// Receive drops the interface counts itself (rtnl_link_stats64, what
// /sys/class/net/IF/statistics shows), since the interface was created: any
// traffic, no flow's. XDP never sees these datagrams, so no flow's FlowStats
// can count them.
struct InterfaceRxDrops {
    uint64_t dropped = 0; // rx_dropped: on most drivers before any XDP program runs (veth also counts a failed XDP redirect here)
    uint64_t missed = 0;  // rx_missed_errors: the NIC had no descriptor
};

// Reads them over rtnetlink, so they are the calling thread's namespace's.
// Throws std::system_error: ENODEV when there is no such interface.
InterfaceRxDrops interfaceRxDrops(const std::string& ifname);

} // namespace npf
