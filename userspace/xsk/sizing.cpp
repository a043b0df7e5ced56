#include "xsk/sizing.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <bit>
#include <cstring>
#include <string>

#include "sys/error.h"
#include "sys/fd.h"

namespace npf::xsk {

uint32_t interfaceMtu(uint32_t ifindex)
{
    ifreq ifr{};
    if (!if_indextoname(ifindex, ifr.ifr_name))
        throwErrno("name of ifindex " + std::to_string(ifindex) + " (for its MTU)");
    Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s)
        throwErrno("socket for SIOCGIFMTU");
    checkErrno(::ioctl(s.get(), SIOCGIFMTU, &ifr), std::string("MTU of ") + ifr.ifr_name + " (SIOCGIFMTU)");
    return static_cast<uint32_t>(ifr.ifr_mtu);
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
