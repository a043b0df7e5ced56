#include "engine/queue_plan.h"

#include <algorithm>
#include <cerrno>

#include "dataplane/dataplane.h"
#include "dataplane/iface.h"
#include "sys/error.h"

namespace npf {
namespace {

// Queues npf_xdp serves on the interface: the attached program's, else what
// attaching it would size it for (the NIC's RX queues).
uint32_t availableQueues(const std::string& ifname)
{
    try {
        return dataplane::Dataplane::open(ifname).queues();
    } catch (const StateError& e) {
        if (e.code().value() != ENOENT) // npf not attached
            throw;
    }
    return dataplane::rxQueueCount(ifname);
}

} // namespace

xsk::QueueSizes serviceQueueSizes(const EngineConfig& cfg, uint32_t mtu) noexcept
{
    return xsk::queueSizes(mtu, NPF_POST_RING_SIZE, cfg.frameSize, cfg.frameCount, cfg.rxRingSize);
}

xsk::QueueConfig serviceQueueConfig(uint32_t ifindex, uint32_t q, const xsk::QueueSizes& sizes) noexcept
{
    xsk::QueueConfig qc;
    qc.ifindex = ifindex;
    qc.queue = q;
    qc.umem.frameSize = sizes.frameSize;
    qc.umem.frameCount = sizes.frameCount;
    qc.primaryRxSize = sizes.rxRingSize;
    qc.backupRxSize = sizes.rxRingSize;
    qc.regionBytes = NPF_MAX_REGION_PAGES * NPF_PAGE_SIZE;
    return qc;
}

QueuePlan planQueues(const EngineConfig& cfg)
{
    QueuePlan p;
    p.available = availableQueues(cfg.ifname);
    p.queues = cfg.queues ? std::min(cfg.queues, p.available) : p.available;
    p.mtu = dataplane::linkMtu(cfg.ifname);
    p.sizes = serviceQueueSizes(cfg, p.mtu);
    p.perQueue = xsk::queueMemory(p.sizes);
    return p;
}

} // namespace npf
