// A queue's primary and backup AF_XDP sockets as npf uses them: one UMEM,
// the backup bound with XDP_SHARED_UMEM to the same device queue, copy mode,
// no XDP program of libxdp's own (npf_xdp owns the XSKMAP).
#pragma once

#include <xdp/xsk.h>

#include <cstdint>
#include <string>

#include "sys/mmap_area.h"

namespace npf::test {

class XskPair {
public:
    // Binds both sockets to ifname/queue in the calling thread's network namespace.
    XskPair(const std::string& ifname, uint32_t queue);
    ~XskPair();
    XskPair(const XskPair&) = delete;
    XskPair& operator=(const XskPair&) = delete;

    int primaryFd() const noexcept { return xsk_socket__fd(primary_); }
    int backupFd() const noexcept { return xsk_socket__fd(backup_); }

private:
    void close() noexcept;

    static constexpr uint32_t kFrames = 64;

    // libxdp keeps pointers to the rings: the object never moves.
    MmapArea area_;
    xsk_ring_prod fill_{};
    xsk_ring_cons comp_{};
    xsk_ring_cons primaryRx_{};
    xsk_ring_cons backupRx_{};
    xsk_umem* umem_ = nullptr;
    xsk_socket* primary_ = nullptr;
    xsk_socket* backup_ = nullptr;
};

} // namespace npf::test
