// Which npf_xsks slots of a running instance hold an AF_XDP socket. Works
// without the kernel's AF_XDP sock_diag (CONFIG_XDP_SOCKETS_DIAG), whichever
// process owns the sockets, by test-running a tiny XDP probe on the pinned map.
#pragma once

#include <cstdint>
#include <vector>

namespace npf::dataplane {

class Dataplane;

struct XskSlot {
    uint32_t slot = 0;  // npf_xsks index: NPF_XSK_PRIMARY(q) or NPF_XSK_BACKUP(q)
    uint32_t queue = 0; // the queue the socket is bound to (should be slot / 2)
    bool backup() const { return slot % 2 == 1; }
};

// Occupied slots, by slot.
std::vector<XskSlot> xskSlots(const Dataplane& dp);

// Sorted distinct queues (slot / 2) that have at least one socket.
std::vector<uint32_t> slotQueues(const std::vector<XskSlot>& slots);

} // namespace npf::dataplane
