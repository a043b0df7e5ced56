#include "daemon/delegation.h"

#include "dataplane/iface.h"
#include "dataplane/xsk_slots.h"
#include "engine/local_xdp.h"
#include "engine/queue_plan.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf::daemon {

Delegation::Delegation(const EngineConfig& cfg) : cfg_(cfg)
{
    dp_.emplace(openOrAttach(cfg_, &attachedByUs_));
    queues_ = cfg_.queues ? std::min(cfg_.queues, dp_->queues()) : dp_->queues();
    const uint32_t mtu = dataplane::linkMtu(cfg_.ifname);
    sizes_ = serviceQueueSizes(cfg_, mtu);
    NPF_INFO("%s: delegated to its client (%u queues; MTU %u, %u-byte UMEM frames, %u per largest packet)",
             cfg_.ifname.c_str(), queues_, mtu, sizes_.frameSize, sizes_.framesPerPacket);
}

Delegation::~Delegation()
{
    bound_.clear();
    if (attachedByUs_)
        detachOrWarn(cfg_.ifname, false);
}

bool Delegation::reserve(const void* who) noexcept
{
    if (holder_ && holder_ != who)
        return false;
    holder_ = who;
    return true;
}

void Delegation::bind()
{
    bound_.clear();
    // A socket another process holds keeps its queue (the kernel says
    // EBUSY to a new bind): the XSKMAP tells whether any is still in it.
    if (const std::vector<dataplane::XskSlot> slots = dataplane::xskSlots(*dp_); !slots.empty())
        throw StateError(EBUSY, cfg_.ifname + ": sockets of an earlier client are still bound (npfctl status " +
                                    cfg_.ifname + " names their process): it must exit first");
    std::vector<std::unique_ptr<xsk::DelegatedQueue>> made;
    for (uint32_t q = 0; q < queues_; q++) {
        const xsk::QueueConfig qc = serviceQueueConfig(static_cast<uint32_t>(dp_->ifindex()), q, sizes_);
        try {
            made.push_back(std::make_unique<xsk::DelegatedQueue>(qc, dp_->xsks()));
        } catch (const std::system_error& e) {
            if (e.code().value() != EBUSY)
                throw;
            throw StateError(EBUSY, cfg_.ifname + ": queue " + std::to_string(q) +
                                        " is still bound to the sockets of an earlier client (a process kept "
                                        "them): it must exit first (" + e.what() + ")");
        }
    }
    bound_ = std::move(made);
}

void Delegation::release(const void* who) noexcept
{
    if (holder_ != who)
        return;
    bound_.clear();
    holder_ = nullptr;
}

} // namespace npf::daemon
