#include "engine/local_xdp.h"

#include "dataplane/attach.h"
#include "dataplane/iface.h"
#include "dataplane/pins.h"
#include "dataplane/post_ring.h"
#include "dataplane/stats.h"
#include "dataplane/xsk_slots.h"
#include "engine/queue_plan.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf {

dataplane::Dataplane openOrAttach(const EngineConfig& cfg, bool* attached)
{
    dataplane::ensureBpffs();
    try {
        dataplane::Dataplane dp = dataplane::Dataplane::open(cfg.ifname);
        if (!cfg.xdpThenPin.empty() || cfg.xdpThenExisting)
            NPF_INFO("npf_xdp is attached to %s already: the program to chain behind it is not applied (npfctl "
                     "status %s shows what is chained)",
                     cfg.ifname.c_str(), cfg.ifname.c_str());
        return dp;
    } catch (const StateError& e) {
        if (e.code().value() != ENOENT)
            throw;
    }
    dataplane::AttachOptions opt;
    opt.ifname = cfg.ifname;
    opt.mode = cfg.mode == XdpMode::Native ? dataplane::AttachMode::Native : dataplane::AttachMode::Skb;
    opt.thenPin = cfg.xdpThenPin;
    opt.thenExisting = cfg.xdpThenExisting;
    dataplane::AttachResult r = dataplane::attach(opt);
    NPF_INFO("attached npf_xdp to %s (%s, prog id %u, %u queues)", r.ifname.c_str(), dataplane::toString(r.mode),
             r.progId, r.queues);
    if (r.chained)
        NPF_INFO("chained '%s' (prog id %u) behind npf_xdp on %s%s", r.chained->name.c_str(), r.chained->id,
                 r.ifname.c_str(), r.tookOver ? ", in its place" : "");
    *attached = true;
    return dataplane::Dataplane::open(cfg.ifname);
}

LocalXdp::LocalXdp(const EngineConfig& cfg) : cfg_(cfg)
{
    dp_.emplace(openOrAttach(cfg_, &attachedByUs_));
    try {
        setUp();
    } catch (...) {
        detach(false);
        throw;
    }
}

void LocalXdp::setUp()
{
    if (!dataplane::xskSlots(*dp_).empty())
        throw StateError(EBUSY, "another npf engine has sockets bound on " + cfg_.ifname + " (npfctl status " +
                                    cfg_.ifname + ")");
    queues_ = cfg_.queues ? cfg_.queues : dp_->queues();
    if (queues_ > dp_->queues())
        throw ArgumentError("engine on " + cfg_.ifname + ": " + std::to_string(queues_) +
                            " queues requested, the program serves " + std::to_string(dp_->queues()));
    const uint32_t mtu = dataplane::linkMtu(cfg_.ifname); // in this (the service's) network namespace
    sizes_ = serviceQueueSizes(cfg_, mtu);
    NPF_INFO("%s: MTU %u, %u-byte UMEM frames, %u per largest packet", cfg_.ifname.c_str(), mtu, sizes_.frameSize,
             sizes_.framesPerPacket);
}

std::unique_ptr<xsk::QueueSockets> LocalXdp::openQueue(uint32_t q, const xsk::FlowSet& flows)
{
    return std::make_unique<xsk::QueueSockets>(serviceQueueConfig(static_cast<uint32_t>(dp_->ifindex()), q, sizes_),
                                               flows, dp_->xsks());
}

void LocalXdp::withdrawStale()
{
    for (const dataplane::FlowInfo& f : dataplane::listFlows(*dp_))
        if (std::optional<dataplane::FlowRing> ring = dataplane::FlowRing::open(*dp_, f.id))
            dataplane::PostProducer::withdraw(ring->cursor());
}

dataplane::EngineFlow LocalXdp::openFlow(const dataplane::FlowSpec& spec, const dataplane::RegionBinding& binding,
                                         bool fresh)
{
    return dataplane::openEngineFlow(*dp_, spec, binding, fresh);
}

void LocalXdp::removeFlow(const dataplane::FlowSpec& spec, const dataplane::FlowEntry& entry, bool ownsEntry)
{
    if (ownsEntry)
        dataplane::delFlow(*dp_, spec, entry);
    else
        dataplane::unbindRegion(*dp_, spec, entry);
}

dataplane::FlowXdpStats LocalXdp::flowXdpStats(const dataplane::FlowSpec&, const dataplane::FlowEntry& entry) const
{
    return dataplane::readFlowXdpStats(*dp_, entry.id, entry.gen);
}

std::array<uint64_t, NPF_STAT_MAX> LocalXdp::xdpCounters() const { return dataplane::readXdpStats(*dp_); }

void detachOrWarn(const std::string& ifname, bool gone) noexcept
{
    // An interface that is gone took the program with it: force removes the
    // pins the attach created.
    try {
        dataplane::detach(ifname, gone);
    } catch (const std::exception& e) {
        NPF_WARN("detaching npf from %s: %s", ifname.c_str(), e.what());
    }
}

void LocalXdp::detach(bool gone) noexcept
{
    if (attachedByUs_)
        detachOrWarn(cfg_.ifname, gone);
    attachedByUs_ = false;
}

} // namespace npf
