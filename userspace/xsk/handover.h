// npfd's delegated mode (docs/architecture.md, "Delegated mode"): the
// AF_XDP sockets of one RX queue made by the privileged side and run by
// another process, the only tenant of the interface.
//
// npfd (CAP_NET_RAW, CAP_IPC_LOCK, CAP_BPF) makes a DelegatedQueue: the
// UMEM over a memfd it seals against writes (the pinned pages are charged
// to npfd), the primary and the backup socket bound to the queue, both in
// the XSKMAP. It hands the client the memfd and both sockets (SCM_RIGHTS);
// the client adopts them as QueueSockets(Adopt, ...) (queue.h): it maps the
// rings and the frames read-only and runs the queue as an in-process
// engine does. What the client can do with them: read the frames, produce
// any address into the fill ring and consume the RX rings (the kernel
// checks every fill address against the UMEM), wake the socket, read its
// statistics. It cannot write or punch the frames, bind or rebind a
// socket, or reach any other queue or interface.
#pragma once

#include <linux/if_xdp.h>

#include <string>

#include "sys/fd.h"
#include "xsk/config.h"
#include "xsk/socket.h"

namespace npf::xsk {

class DelegatedQueue {
public:
    // Makes both sockets of (cfg.ifindex, cfg.queue) over a new sealed memfd
    // UMEM, binds them and inserts them into the XSKMAP at the queue's
    // slots. No frame is on the fill ring until the client adopts the queue.
    // Must run in the interface's network namespace.
    DelegatedQueue(const QueueConfig& cfg, int xskmapFd);
    // Takes both sockets out of the XSKMAP (the client may hold them still:
    // no datagram reaches them from now on) and closes npfd's copies.
    ~DelegatedQueue();
    DelegatedQueue(const DelegatedQueue&) = delete;
    DelegatedQueue& operator=(const DelegatedQueue&) = delete;

    // The geometry the client adopts: cfg as bound (multiBuffer as the kernel took it).
    const QueueConfig& config() const noexcept { return cfg_; }
    int umemFd() const noexcept { return umem_.get(); }
    int primaryFd() const noexcept { return primary_.fd(); }
    int backupFd() const noexcept { return backup_.fd(); }
    // The kernel's counters of both sockets (the client's drops show here too).
    xdp_statistics primaryStats() const { return primary_.kernelStats(); }
    xdp_statistics backupStats() const { return backup_.kernelStats(); }

private:
    QueueConfig cfg_;
    int xskmap_ = -1; // borrowed: the caller's map outlives the queue
    Fd umem_;
    XskSocket primary_;
    XskSocket backup_;
};

} // namespace npf::xsk
