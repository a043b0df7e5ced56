// AF_XDP sockets of this network namespace, through NETLINK_SOCK_DIAG (what
// `ss --xdp` shows). Userspace cannot read an XSKMAP, so "queues with bound
// sockets" comes from here: sockets bound to an interface and queue, whichever
// process owns them. sock_diag is per network namespace.
#pragma once

#include <cstdint>
#include <vector>

namespace npf::ctl {

struct XdpSocket {
    uint32_t inode = 0;
    uint32_t uid = 0;
    uint32_t ifindex = 0; // 0: not bound
    uint32_t queue = 0;
    uint32_t umemId = 0;  // sockets sharing a UMEM (XDP_SHARED_UMEM) have the same id
};

// All AF_XDP sockets of this namespace.
std::vector<XdpSocket> xdpSockets();

// Those bound to `ifindex`.
std::vector<XdpSocket> xdpSockets(int ifindex);

// Sorted distinct queue ids of `socks`.
std::vector<uint32_t> boundQueues(const std::vector<XdpSocket>& socks);

} // namespace npf::ctl
