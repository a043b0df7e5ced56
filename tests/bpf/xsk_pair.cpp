#include "xsk_pair.h"

#include <linux/if_xdp.h>

#include "sys/error.h"

namespace npf::test {

XskPair::XskPair(const std::string& ifname, uint32_t queue)
{
    const std::string where = ifname + " queue " + std::to_string(queue);
    area_ = MmapArea::map(kFrames * XSK_UMEM__DEFAULT_FRAME_SIZE, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, "UMEM for " + where);
    xsk_umem_config ucfg{.fill_size = kFrames,
                         .comp_size = kFrames,
                         .frame_size = XSK_UMEM__DEFAULT_FRAME_SIZE,
                         .frame_headroom = 0,
                         .flags = 0};
    checkNeg(xsk_umem__create(&umem_, area_.get(), area_.size(), &fill_, &comp_, &ucfg),
             "create UMEM for " + where);
    xsk_socket_config scfg{};
    scfg.rx_size = kFrames;
    scfg.tx_size = 0;
    scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    scfg.bind_flags = XDP_COPY;
    try {
        checkNeg(xsk_socket__create(&primary_, ifname.c_str(), queue, umem_, &primaryRx_, nullptr, &scfg),
                 "bind primary AF_XDP socket to " + where);
        checkNeg(xsk_socket__create_shared(&backup_, ifname.c_str(), queue, umem_, &backupRx_, nullptr, &fill_,
                                           &comp_, &scfg),
                 "bind backup AF_XDP socket (shared UMEM) to " + where);
    } catch (...) {
        close();
        throw;
    }
}

XskPair::~XskPair() { close(); }

void XskPair::close() noexcept
{
    if (backup_)
        xsk_socket__delete(backup_);
    if (primary_)
        xsk_socket__delete(primary_);
    if (umem_)
        (void)xsk_umem__delete(umem_);
    backup_ = primary_ = nullptr;
    umem_ = nullptr;
}

} // namespace npf::test
