// UMEM and RX ring sizes for the packets an interface can deliver. A packet
// larger than a frame spans several frames (multi-buffer, XDP_USE_SG), so the
// frames and ring entries a datagram in flight needs grow with the MTU.
#pragma once

#include <cstdint>

#include "npf/abi.h"

namespace npf::xsk {

// Packet bytes one UMEM frame holds: the kernel keeps XDP_PACKET_HEADROOM
// (256) plus the UMEM's own headroom in front of the packet.
constexpr uint32_t frameCapacity(uint32_t frameSize, uint32_t headroom = 0) noexcept
{
    return frameSize - 256 - headroom;
}

// Largest frame an interface with this MTU delivers to an AF_XDP socket: the
// Ethernet header and one VLAN tag on top of the MTU, and the npf_meta XDP
// puts in front of the packet.
constexpr uint32_t maxFrameBytes(uint32_t mtu) noexcept { return mtu + 14 + 4 + sizeof(npf_meta); }

// Frames (RX descriptors) the largest packet of an interface with this MTU takes.
constexpr uint32_t framesPerPacket(uint32_t mtu, uint32_t frameSize, uint32_t headroom = 0) noexcept
{
    const uint32_t cap = frameCapacity(frameSize, headroom);
    return (maxFrameBytes(mtu) + cap - 1) / cap;
}

struct QueueSizes {
    uint32_t frameSize = 0;  // 2048 or 4096
    uint32_t frameCount = 0; // UMEM frames: frameSize * frameCount bytes pinned
    uint32_t rxRingSize = 0; // RX ring entries of each socket (a power of two)
    uint32_t framesPerPacket = 0;
};

// Fills in what the caller left 0 so that `inFlight` datagrams of the largest
// packet of an interface with this MTU fit the RX ring, and twice their frames
// the UMEM (the rule for MTU 1500 since the first design: RX rings of the post
// ring's size and twice as many frames never overflow with one flow).
// frameSize 0 picks the frame size that pins the fewest bytes per largest
// packet, the larger one on a tie (fewer descriptors per packet): 2048 up to
// MTU 1742, 4096 for jumbo frames (MTU 9000: 3 frames of 4 KiB, where 2 KiB
// frames take 6 for the same 12 KiB).
QueueSizes queueSizes(uint32_t mtu, uint32_t inFlight, uint32_t frameSize, uint32_t frameCount,
                      uint32_t rxRingSize) noexcept;

// The fill ring a UMEM of `frameCount` frames gets unless told otherwise:
// the smallest power of two >= twice the frames (config.h, UmemConfig).
uint32_t defaultFillSize(uint32_t frameCount) noexcept;

// The memory one queue of these sizes holds, in bytes: its UMEM (frameSize
// x frameCount, populated and pinned: 16 MiB at MTU 1500), the UMEM's fill
// and completion rings at their default sizes, the RX rings of its primary
// and backup sockets (each ring with a page for its producer and consumer),
// and the stash of its frames. What npfd checks against its cgroup's memory
// limit before it pins any (daemon/memory_limit.h).
uint64_t queueMemory(const QueueSizes& q) noexcept;

} // namespace npf::xsk
