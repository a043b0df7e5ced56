// RAII AF_XDP socket with an RX ring, bound to (ifindex, queue).
//
// Raw syscalls rather than libxdp's xsk_socket__create_shared(): a queue's
// primary and backup sockets share one UMEM and its one fill ring, fed by
// two threads under a lock (umem.h) through npf's own ring types (ring.h),
// where libxdp picks shared rings from a per-UMEM list of (netns, ifindex,
// queue) contexts and owns their mappings; the sockets go to XSKMAP slots
// 2q / 2q+1 (libxdp's xsk_socket__update_xskmap uses key q); and a bind
// that finds the queue still held by a just-closed socket (EBUSY) is retried
// on the same socket with its UMEM and rings in place. Zero-copy versus copy
// mode is the kernel's choice (BindMode::Auto), read back with XDP_OPTIONS.
#pragma once

#include <linux/if_xdp.h>

#include <cstdint>
#include <string>

#include "sys/fd.h"
#include "sys/mmap_area.h"
#include "xsk/config.h"
#include "xsk/ring.h"

namespace npf::xsk {

// A new, unbound AF_XDP socket.
Fd openXskSocket(const std::string& what);

class XskSocket {
public:
    XskSocket() noexcept = default;

    // Binds `fd`, which already has the UMEM registered, as the first socket
    // of (ifindex, queue). BindMode::Auto binds once with neither
    // XDP_ZEROCOPY nor XDP_COPY: the kernel takes zero-copy when the driver
    // can and copy mode otherwise; zeroCopy() says which. multiBuffer asks
    // for XDP_USE_SG (see QueueConfig::multiBuffer).
    // EBUSY is retried for busyWaitMs (see QueueConfig::busyWaitMs).
    static XskSocket bindOwner(Fd fd, uint32_t ifindex, uint32_t queue, uint32_t rxSize, BindMode mode,
                               bool needWakeup, bool multiBuffer, uint32_t busyWaitMs, const std::string& name);
    // Binds a new socket to the same (ifindex, queue), sharing the owner's
    // UMEM and its fill ring (XDP_SHARED_UMEM); it inherits the owner's
    // mode, need_wakeup and multi-buffer setting (the kernel keeps them in the UMEM).
    static XskSocket bindShared(const XskSocket& owner, uint32_t ifindex, uint32_t queue, uint32_t rxSize,
                                const std::string& name);

    // A socket another process made and bound (npfd's delegated mode) with
    // an RX ring of rxSize entries: maps the ring. The UMEM's owner socket
    // is adopted with its Umem (umem.h, Adopt).
    static XskSocket adopt(Fd fd, uint32_t rxSize, bool multiBuffer, const std::string& name);

    // Puts this socket into an XSKMAP at `slot`. Closing the socket removes it.
    void insertInto(int xskmapFd, uint32_t slot) const;
    // Kernel counters of this socket (XDP_STATISTICS).
    xdp_statistics kernelStats() const;
    // Wakes the kernel to process the fill/RX rings (need_wakeup); returns 0 or -errno.
    int kick() const noexcept;

    int fd() const noexcept { return fd_.get(); }
    RxRing& rx() noexcept { return rx_; }
    uint32_t rxBacklog() const noexcept { return rx_.backlog(); }
    uint32_t rxProduced() const noexcept { return rx_.producedIndex(); }
    uint32_t rxConsumed() const noexcept { return rx_.consumedIndex(); }
    bool zeroCopy() const noexcept { return zeroCopy_; }
    // Bound with XDP_USE_SG: a packet may span several RX descriptors.
    bool multiBuffer() const noexcept { return multiBuffer_; }
    const std::string& name() const noexcept { return name_; }

private:
    Fd fd_;
    MmapArea rxMap_;
    RxRing rx_;
    bool zeroCopy_ = false;
    bool multiBuffer_ = false;
    std::string name_;
};

} // namespace npf::xsk
