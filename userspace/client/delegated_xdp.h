// npf::Client's side of delegated mode (xdp_link.h): the data path npfd
// handed over -- every queue's sockets over npfd's UMEM, the region's
// resident bitmap -- run by an in-process Service; flows opened, closed and
// counted by request to npfd, which keeps their entries.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/xdp_link.h"
#include "ipc/protocol.h"
#include "npf/counters.h"
#include "sys/fd.h"

namespace npf {

// What the link asks of npfd, over the Client's connection. Each throws
// std::system_error naming what failed (npfd's refusal, a lost connection).
struct NpfdCalls {
    // delegate_flow: the reply, and the post ring map in *ring.
    std::function<ipc::DelegateFlowReply(const ipc::DelegateFlowRequest&, Fd* ring)> openFlow;
    std::function<void(uint32_t flow)> closeFlow;
    std::function<FlowStats(uint32_t flow, uint16_t port)> flowStats; // port: for its messages
    // Why the connection is lost ("" while it is not); probe: may ask the kernel.
    std::function<std::string(bool probe)> lost;
    int hangupFd = -1; // the connection: it hangs up when npfd goes
};

// One queue's descriptors as npfd sent them (queue's reply).
struct HandedQueue {
    Fd umem, primary, backup;
};

class DelegatedXdp : public XdpLink {
public:
    // `queues`: queue q's descriptors at [q], every queue the reply names.
    DelegatedXdp(const ipc::DelegateReply& d, std::vector<HandedQueue> queues, NpfdCalls calls);

    const std::string& ifname() const noexcept override { return d_.iface; }
    int ifindex() const noexcept override { return static_cast<int>(d_.ifindex); }
    uint32_t progId() const noexcept override { return d_.progId; }
    uint32_t queues() const noexcept override { return d_.queues; }
    const xsk::QueueSizes& sizes() const noexcept override { return sizes_; }
    std::unique_ptr<xsk::QueueSockets> openQueue(uint32_t q, const xsk::FlowSet& flows) override;
    // npfd gives every flow a ring nobody else has mapped: none to withdraw.
    void withdrawStale() override {}
    dataplane::EngineFlow openFlow(const dataplane::FlowSpec& spec, const dataplane::RegionBinding& binding,
                                   bool fresh) override;
    void removeFlow(const dataplane::FlowSpec& spec, const dataplane::FlowEntry& entry, bool ownsEntry) override;
    dataplane::FlowXdpStats flowXdpStats(const dataplane::FlowSpec& spec,
                                         const dataplane::FlowEntry& entry) const override;
    // The program's counters are the operator's (npfctl stats): zeros here.
    std::array<uint64_t, NPF_STAT_MAX> xdpCounters() const override { return {}; }
    std::string lost(bool probe) const override { return calls_.lost(probe); }
    int hangupFd() const noexcept override { return calls_.hangupFd; }

private:
    ipc::DelegateReply d_;
    xsk::QueueSizes sizes_;
    std::vector<HandedQueue> handed_;
    NpfdCalls calls_;
};

} // namespace npf
