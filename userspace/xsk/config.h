// Sizing and mode of the AF_XDP layer.
#pragma once

#include <cstdint>

namespace npf::xsk {

// UMEM of one RX queue: the only pinned memory of npf (frameSize * frameCount bytes).
struct UmemConfig {
    uint32_t frameSize = 4096;  // power of two, 2048 .. page size (aligned chunk mode)
    uint32_t frameCount = 2048; // frames shared by the queue's primary and backup rings
    // Fill ring entries, a power of two >= 2 * frameCount (0 = smallest such).
    // Twice the frames because the kernel publishes its consumer index lazily:
    // frames it already took can still occupy slots, so with fewer entries a
    // recycled frame could find the ring full.
    uint32_t fillSize = 0;
    uint32_t compSize = 64; // completion ring; unused (RX only) but required by bind
    uint32_t headroom = 0;  // extra headroom before each packet (XDP_UMEM_REG)
};

enum class BindMode {
    Auto,     // neither flag: the kernel takes zero-copy if the driver can, else copy
    ZeroCopy, // XDP_ZEROCOPY or fail
    Copy,     // XDP_COPY
};

struct QueueConfig {
    uint32_t ifindex = 0;
    uint32_t queue = 0;
    UmemConfig umem;
    uint32_t primaryRxSize = 2048; // RX ring entries of the primary socket (power of two)
    uint32_t backupRxSize = 2048;  // RX ring entries of the backup socket (power of two)
    BindMode mode = BindMode::Auto;
    bool needWakeup = true;
    // Bind with XDP_USE_SG: a packet larger than a frame (jumbo frames) arrives
    // as several RX descriptors instead of being dropped by the kernel. Kernels
    // before 6.6 refuse the flag; the socket is then bound without it, with a
    // warning (XskSocket::multiBuffer() says which).
    bool multiBuffer = true;
    // A closed socket releases its queue asynchronously (deferred kernel
    // work), so binding right after a previous owner closed can see EBUSY:
    // retry for this long before giving up.
    uint32_t busyWaitMs = 1000;
    uint64_t regionBytes = 0; // region size: metas pointing beyond it are rejected
};

} // namespace npf::xsk
