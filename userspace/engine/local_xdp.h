// npf_xdp worked by the service's own process (xdp_link.h): the program
// attached to the interface (or opened, if `npfctl attach` put it there),
// its maps opened through their pins, each queue's sockets made and put in
// the XSKMAP. Needs CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW (and CAP_IPC_LOCK
// for the UMEM). npf::Engine and npfd's brokered interfaces use it; npfd's
// delegated interfaces use its attach half (openOrAttach, detachOrWarn) alone.
#pragma once

#include <optional>

#include "dataplane/dataplane.h"
#include "engine/xdp_link.h"
#include "npf/engine.h"

namespace npf {

// npf_xdp on cfg.ifname (this network namespace): opened if attached, else
// attached in cfg.mode (with cfg's chaining). *attached says which.
dataplane::Dataplane openOrAttach(const EngineConfig& cfg, bool* attached);
// Its undoing: detaches npf_xdp from `ifname` (gone: the interface took the
// program with it, the pins go anyway); a failure is logged.
void detachOrWarn(const std::string& ifname, bool gone) noexcept;

class LocalXdp : public XdpLink {
public:
    // Opens or attaches the program, then checks that no other engine has
    // sockets bound on it (EBUSY) and sizes the queues for the link's MTU.
    // A failure after the attach detaches again.
    explicit LocalXdp(const EngineConfig& cfg);

    const std::string& ifname() const noexcept override { return cfg_.ifname; }
    int ifindex() const noexcept override { return dp_->ifindex(); }
    uint32_t progId() const noexcept override { return dp_->progId(); }
    bool attachedByUs() const noexcept override { return attachedByUs_; }
    uint32_t queues() const noexcept override { return queues_; }
    const xsk::QueueSizes& sizes() const noexcept override { return sizes_; }
    std::unique_ptr<xsk::QueueSockets> openQueue(uint32_t q, const xsk::FlowSet& flows) override;
    void withdrawStale() override;
    dataplane::EngineFlow openFlow(const dataplane::FlowSpec& spec, const dataplane::RegionBinding& binding,
                                   bool fresh) override;
    void removeFlow(const dataplane::FlowSpec& spec, const dataplane::FlowEntry& entry, bool ownsEntry) override;
    dataplane::FlowXdpStats flowXdpStats(const dataplane::FlowSpec& spec,
                                         const dataplane::FlowEntry& entry) const override;
    std::array<uint64_t, NPF_STAT_MAX> xdpCounters() const override;
    void detach(bool gone) noexcept override;

private:
    void setUp();

    const EngineConfig& cfg_; // the service's
    bool attachedByUs_ = false;
    std::optional<dataplane::Dataplane> dp_;
    uint32_t queues_ = 0;
    xsk::QueueSizes sizes_;
};

} // namespace npf
