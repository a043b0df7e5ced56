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
    s.multiBuffer_ = multiBuffer;
    // Auto sets neither XDP_ZEROCOPY nor XDP_COPY: the kernel then tries
    // zero-copy and falls back to copy mode itself, also when the driver has
    // zero-copy but not zero-copy multi-buffer (copy mode keeps XDP_USE_SG).
    uint16_t flags = needWakeup ? XDP_USE_NEED_WAKEUP : 0;
    if (mode == BindMode::ZeroCopy)
        flags |= XDP_ZEROCOPY;
    else if (mode == BindMode::Copy)
        flags |= XDP_COPY;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busyWaitMs);
    auto bindWaiting = [&](uint16_t f) {
        int r;
        while ((r = bindTo(fd.get(), ifindex, queue, f, -1)) == -EBUSY && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return r;
    };
    auto noMultiBuffer = [&](const char* why) {
        s.multiBuffer_ = false;
        NPF_WARN("%s: bound without XDP_USE_SG (%s): packets larger than a UMEM frame are dropped by the kernel",
                 name.c_str(), why);
    };
    int rc = bindWaiting(multiBuffer ? flags | XDP_USE_SG : flags);
    if (multiBuffer && rc == -EINVAL && (rc = bindWaiting(flags)) == 0)
        noMultiBuffer("the kernel does not know the flag; jumbo frames need Linux >= 6.6");
    else if (multiBuffer && rc == -EOPNOTSUPP && mode == BindMode::ZeroCopy && (rc = bindWaiting(flags)) == 0)
        noMultiBuffer("the driver has no zero-copy multi-buffer support");
    const std::string what = "bind " + name + " to " + where(ifindex, queue) +
                             (mode == BindMode::ZeroCopy ? " (zero-copy)" : mode == BindMode::Copy ? " (copy)" : "");
    if (rc == -EOPNOTSUPP && mode == BindMode::ZeroCopy)
        throwErrno(-rc, what + ": the driver does not support it -- use copy mode");
    checkNeg(rc, what + (rc == -EBUSY ? ": another AF_XDP socket owns this queue (another npf service?)" : ""));
    s.fd_ = std::move(fd);

    xdp_options opts{};
    socklen_t len = sizeof(opts);
    checkErrno(::getsockopt(s.fd_.get(), SOL_XDP, XDP_OPTIONS, &opts, &len), name + ": XDP_OPTIONS");
    s.zeroCopy_ = opts.flags & XDP_OPTIONS_ZEROCOPY;
    if (mode == BindMode::Auto && !s.zeroCopy_)
        NPF_DEBUG("%s: no zero-copy on %s, the kernel bound it in copy mode", name.c_str(),
                  where(ifindex, queue).c_str());
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

XskSocket XskSocket::adopt(Fd fd, uint32_t rxSize, bool multiBuffer, const std::string& name)
{
    XskSocket s;
    s.name_ = name;
    xdp_options opts{};
    socklen_t len = sizeof(opts);
    checkErrno(::getsockopt(fd.get(), SOL_XDP, XDP_OPTIONS, &opts, &len),
               name + ": XDP_OPTIONS (is it a bound AF_XDP socket?)");
    s.zeroCopy_ = opts.flags & XDP_OPTIONS_ZEROCOPY;
    if (!std::has_single_bit(rxSize))
        throwErrno(EINVAL, name + ": RX ring size " + std::to_string(rxSize) + " must be a power of two");
    xdp_mmap_offsets off = ringOffsets(fd.get(), name);
    RingPtrs p;
    s.rxMap_ = mapRing(fd.get(), off.rx, XDP_PGOFF_RX_RING, rxSize, sizeof(xdp_desc), &p, name + ": RX ring");
    s.rx_ = RxRing(p);
    s.multiBuffer_ = multiBuffer;
    s.fd_ = std::move(fd);
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
