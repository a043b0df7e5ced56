#include "xsk/sizing.h"

#include <linux/if_xdp.h>

#include <bit>
#include <cstring>
#include <string>

#include "xsk/config.h"

namespace npf::xsk {

uint32_t defaultFillSize(uint32_t frameCount) noexcept { return std::bit_ceil(2 * frameCount); }

uint64_t queueMemory(const QueueSizes& q) noexcept
{
    constexpr uint64_t kRingHead = 4096;
    constexpr uint64_t kDesc = sizeof(xdp_desc), kAddr = sizeof(uint64_t);
    const uint64_t umem = uint64_t(q.frameSize) * q.frameCount;
    const uint64_t fill = defaultFillSize(q.frameCount) * kAddr + kRingHead;
    const uint64_t completion = UmemConfig{}.compSize * kAddr + kRingHead;
    const uint64_t rx = 2 * (q.rxRingSize * kDesc + kRingHead);
    const uint64_t stash = q.frameCount * kAddr;
    return umem + fill + completion + rx + stash;
}

QueueSizes queueSizes(uint32_t mtu, uint32_t inFlight, uint32_t frameSize, uint32_t frameCount,
                      uint32_t rxRingSize) noexcept
{
    QueueSizes q;
    q.frameSize = frameSize;
    if (!q.frameSize) {
        const uint64_t small = uint64_t(framesPerPacket(mtu, 2048)) * 2048;
        const uint64_t large = uint64_t(framesPerPacket(mtu, 4096)) * 4096;
        q.frameSize = large <= small ? 4096 : 2048;
    }
    q.framesPerPacket = q.frameSize > 256 ? framesPerPacket(mtu, q.frameSize) : 1;
    const uint64_t descs = uint64_t(inFlight) * q.framesPerPacket;
    q.frameCount = frameCount ? frameCount : static_cast<uint32_t>(2 * descs);
    q.rxRingSize = rxRingSize ? rxRingSize : std::bit_ceil(static_cast<uint32_t>(descs));
    return q;
}

} // namespace npf::xsk
