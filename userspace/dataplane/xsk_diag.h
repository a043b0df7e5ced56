// AF_XDP sockets of this network namespace, through NETLINK_SOCK_DIAG (what
// `ss --xdp` shows): `npfctl status` lists those bound to the interface,
// whichever process owns them. Which of them sit in npf_xsks sock_diag cannot
// tell; the bound queues come from the map itself (xsk_slots.h). Kernels
// without CONFIG_XDP_SOCKETS_DIAG (6.18 here) have no AF_XDP sock_diag:
// xdpSockets() throws ENOENT and status lists no sockets.
#pragma once

#include <cstdint>
#include <vector>

namespace npf::dataplane {

struct XdpSocket {
    uint32_t inode = 0;
    uint32_t uid = 0;
    uint32_t ifindex = 0; // 0: not bound
    uint32_t queue = 0;
    uint32_t umemId = 0;  // sockets sharing a UMEM (XDP_SHARED_UMEM) have the same id
};

// All AF_XDP sockets of this namespace; ENOENT without AF_XDP sock_diag.
std::vector<XdpSocket> xdpSockets();

} // namespace npf::dataplane
