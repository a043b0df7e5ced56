// What a Service asks of npf_xdp on its interface: the queues' sockets, the
// flow entries XDP steers by, XDP's counters. Two kinds:
//   LocalXdp (local_xdp.h)  the service's own process attaches (or opens)
//                           the program and works its maps: npf::Engine, npfd
//   DelegatedXdp            npfd did the privileged part and handed over the
//     (client/delegated_xdp.h) sockets; flows are opened and removed by
//                           request to it: npf::Client in delegated mode
// Methods run on the service's control threads (its constructor, open and
// close of flows, stats), never on a worker or a pager.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "dataplane/flows.h"
#include "npf/abi.h"
#include "xsk/queue.h"
#include "xsk/sizing.h"

namespace npf {

class XdpLink {
public:
    virtual ~XdpLink() = default;

    virtual const std::string& ifname() const noexcept = 0;
    virtual int ifindex() const noexcept = 0;
    virtual uint32_t progId() const noexcept = 0;
    // The service attached the program (and detaches it at the end).
    virtual bool attachedByUs() const noexcept { return false; }

    // The queues the service serves and each one's geometry.
    virtual uint32_t queues() const noexcept = 0;
    virtual const xsk::QueueSizes& sizes() const noexcept = 0;
    // Queue q's sockets, taking frames for `flows` (which outlives them).
    virtual std::unique_ptr<xsk::QueueSockets> openQueue(uint32_t q, const xsk::FlowSet& flows) = 0;

    // Flows (FlowTable): posts a previous engine left are discarded, before
    // any socket is bound; a flow's entry is made (or taken over) bound to
    // `binding`; removed (or unbound, if the engine did not add it). Throw
    // std::system_error naming what failed.
    virtual void withdrawStale() = 0;
    virtual dataplane::EngineFlow openFlow(const dataplane::FlowSpec& spec, const dataplane::RegionBinding& binding,
                                           bool fresh) = 0;
    virtual void removeFlow(const dataplane::FlowSpec& spec, const dataplane::FlowEntry& entry, bool ownsEntry) = 0;

    // XDP's counts of one flow's datagrams (this generation of its id), and
    // of the whole program.
    virtual dataplane::FlowXdpStats flowXdpStats(const dataplane::FlowSpec& spec,
                                                 const dataplane::FlowEntry& entry) const = 0;
    virtual std::array<uint64_t, NPF_STAT_MAX> xdpCounters() const = 0;

    // Why the service can no longer be run, "" while it can (the delegated
    // link: npfd hung up); probe: may ask the kernel. A descriptor that
    // becomes readable (or hangs up) when that happens, -1 if none.
    virtual std::string lost(bool probe) const { (void)probe; return ""; }
    virtual int hangupFd() const noexcept { return -1; }

    // The service ends (in the interface's network namespace): undoes the
    // attach if it made it; `gone`: the interface went with the program.
    virtual void detach(bool gone) noexcept { (void)gone; }
};

} // namespace npf
