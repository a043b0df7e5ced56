#include "xsk/sizing.h"


#include <bit>
#include <cstring>
#include <string>


namespace npf::xsk {

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
