#include "xsk/socket.h"

#include <bpf/bpf.h>
#include <sys/socket.h>

#include <bit>
#include <chrono>
#include <cstring>
#include <thread>

#include "sys/error.h"
#include "sys/log.h"
#include "xsk/umem.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
// Linux 6.6 uapi (Debian's headers are 6.1).
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif

namespace npf::xsk {

Fd openXskSocket(const std::string& what)
{
    Fd fd(::socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0));
    if (!fd)
        throwErrno("socket(AF_XDP) for " + what + " (needs CAP_NET_RAW and CONFIG_XDP_SOCKETS)");
    return fd;
}

namespace {

// Creates and maps the RX ring of `fd` (before bind).
MmapArea setupRx(int fd, uint32_t rxSize, RxRing* rx, const std::string& name)
{
    if (!std::has_single_bit(rxSize))
        throwErrno(EINVAL, name + ": RX ring size " + std::to_string(rxSize) + " must be a power of two");
    checkErrno(::setsockopt(fd, SOL_XDP, XDP_RX_RING, &rxSize, sizeof(rxSize)),
               name + ": RX ring of " + std::to_string(rxSize));
    xdp_mmap_offsets off = ringOffsets(fd, name);
    RingPtrs p;
    MmapArea m = mapRing(fd, off.rx, XDP_PGOFF_RX_RING, rxSize, sizeof(xdp_desc), &p, name + ": RX ring");
    *rx = RxRing(p);
    return m;
}

int bindTo(int fd, uint32_t ifindex, uint32_t queue, uint16_t flags, int sharedFd)
{
    sockaddr_xdp sxdp{};
    sxdp.sxdp_family = AF_XDP;
    sxdp.sxdp_ifindex = ifindex;
    sxdp.sxdp_queue_id = queue;
    sxdp.sxdp_flags = flags;
    sxdp.sxdp_shared_umem_fd = sharedFd < 0 ? 0 : uint32_t(sharedFd);
    return ::bind(fd, reinterpret_cast<sockaddr*>(&sxdp), sizeof(sxdp)) == 0 ? 0 : -errno;
}

std::string where(uint32_t ifindex, uint32_t queue)
{
    return "ifindex " + std::to_string(ifindex) + " queue " + std::to_string(queue);
}

} // namespace

XskSocket XskSocket::bindOwner(Fd fd, uint32_t ifindex, uint32_t queue, uint32_t rxSize, BindMode mode,
                               bool needWakeup, bool multiBuffer, uint32_t busyWaitMs, const std::string& name)
{
    XskSocket s;
    s.name_ = name;
    s.rxMap_ = setupRx(fd.get(), rxSize, &s.rx_, name);
    const uint16_t wake = needWakeup ? XDP_USE_NEED_WAKEUP : 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busyWaitMs);
    s.multiBuffer_ = multiBuffer;
    auto bindWaiting = [&](uint16_t flags) {
        int r;
        while ((r = bindTo(fd.get(), ifindex, queue, flags, -1)) == -EBUSY &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return r;
    };
    auto noMultiBuffer = [&](const char* why) {
        s.multiBuffer_ = false;
        NPF_WARN("%s: bound without XDP_USE_SG (%s): packets larger than a UMEM frame are dropped by the kernel",
                 name.c_str(), why);
    };
    // With XDP_USE_SG when multi-buffer is wanted; a kernel that does not
    // know the flag (before 6.6) refuses it with EINVAL and gets the bind without.
    auto bindSg = [&](uint16_t flags) {
        if (!s.multiBuffer_)
            return bindWaiting(flags);
        int r = bindWaiting(flags | XDP_USE_SG);
        if (r != -EINVAL)
            return r;
        if ((r = bindWaiting(flags)) == 0)
            noMultiBuffer("the kernel does not know the flag; jumbo frames need Linux >= 6.6");
        return r;
    };
    int rc = -EOPNOTSUPP;
    if (mode != BindMode::Copy) {
        rc = bindSg(XDP_ZEROCOPY | wake);
        // A driver with zero-copy but without zero-copy multi-buffer: Auto
        // takes copy mode with multi-buffer (below), ZeroCopy zero-copy without.
        if (rc == -EOPNOTSUPP && s.multiBuffer_ && mode == BindMode::ZeroCopy &&
            (rc = bindWaiting(XDP_ZEROCOPY | wake)) == 0)
            noMultiBuffer("the driver has no zero-copy multi-buffer support");
        s.zeroCopy_ = rc == 0;
        if (rc == -EOPNOTSUPP && mode == BindMode::ZeroCopy)
            throwErrno(-rc, "bind " + name + " to " + where(ifindex, queue) +
                                " (zero-copy): the driver does not support it -- use copy mode");
        if (rc == -EOPNOTSUPP)
            NPF_DEBUG("%s: zero-copy not supported on %s, using copy mode", name.c_str(),
                      where(ifindex, queue).c_str());
    }
    if (rc == -EOPNOTSUPP)
        rc = bindSg(XDP_COPY | wake);
    checkNeg(rc, "bind " + name + " to " + where(ifindex, queue) +
                     (mode == BindMode::ZeroCopy ? " (zero-copy)" : " (copy)") +
                     (rc == -EBUSY ? ": another AF_XDP socket owns this queue (another npf service?)" : ""));
    s.fd_ = std::move(fd);
    return s;
}

XskSocket XskSocket::bindShared(const XskSocket& owner, uint32_t ifindex, uint32_t queue, uint32_t rxSize,
                                const std::string& name)
{
    XskSocket s;
    s.name_ = name;
    Fd fd = openXskSocket(name);
    s.rxMap_ = setupRx(fd.get(), rxSize, &s.rx_, name);
    // Mode and need_wakeup are inherited from the owner; setting them here is EINVAL.
    checkNeg(bindTo(fd.get(), ifindex, queue, XDP_SHARED_UMEM, owner.fd()),
             "bind " + name + " to " + where(ifindex, queue) + " sharing the UMEM of " + owner.name());
    s.fd_ = std::move(fd);
    s.zeroCopy_ = owner.zeroCopy_;
    s.multiBuffer_ = owner.multiBuffer_;
    return s;
}

void XskSocket::insertInto(int xskmapFd, uint32_t slot) const
{
    int fd = fd_.get();
    checkNeg(bpf_map_update_elem(xskmapFd, &slot, &fd, BPF_ANY),
             "insert " + name_ + " into XSKMAP slot " + std::to_string(slot) +
                 " (is the map sized for this queue?)");
}

xdp_statistics XskSocket::kernelStats() const
{
    xdp_statistics st{};
    socklen_t len = sizeof(st);
    checkErrno(::getsockopt(fd_.get(), SOL_XDP, XDP_STATISTICS, &st, &len), name_ + ": XDP_STATISTICS");
    return st;
}

int XskSocket::kick() const noexcept
{
    if (::recvfrom(fd_.get(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr) < 0 && errno != EAGAIN &&
        errno != EBUSY && errno != ENETDOWN)
        return -errno;
    return 0;
}

} // namespace npf::xsk
