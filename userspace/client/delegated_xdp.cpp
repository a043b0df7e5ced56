#include "client/delegated_xdp.h"

#include "dataplane/flow_ring.h"
#include "engine/queue_plan.h"
#include "sys/error.h"

namespace npf {

DelegatedXdp::DelegatedXdp(const ipc::DelegateReply& d, std::vector<HandedQueue> queues, NpfdCalls calls)
    : d_(d), handed_(std::move(queues)), calls_(std::move(calls))
{
    if (handed_.size() != d_.queues)
        throwErrno(EPROTO, "npf client: npfd named " + std::to_string(d_.queues) + " queues and handed over " +
                               std::to_string(handed_.size()));
    sizes_.frameSize = d_.frameSize;
    sizes_.frameCount = d_.frameCount;
    sizes_.rxRingSize = d_.rxSize;
    sizes_.framesPerPacket = d_.framesPerPacket;
}

std::unique_ptr<xsk::QueueSockets> DelegatedXdp::openQueue(uint32_t q, const xsk::FlowSet& flows)
{
    // As npfd bound it: the service's sizes, and the rings and flags it names.
    xsk::QueueConfig qc = serviceQueueConfig(d_.ifindex, q, sizes_);
    qc.umem.fillSize = d_.fillSize;
    qc.umem.compSize = d_.compSize;
    qc.multiBuffer = d_.multiBuffer != 0;
    HandedQueue& h = handed_.at(q);
    return std::make_unique<xsk::QueueSockets>(xsk::Adopt{}, qc, flows, std::move(h.umem), std::move(h.primary),
                                               std::move(h.backup));
}

dataplane::EngineFlow DelegatedXdp::openFlow(const dataplane::FlowSpec& spec, const dataplane::RegionBinding&, bool)
{
    // npfd binds the flow to the bitmap it made for this client's region.
    ipc::DelegateFlowRequest rq;
    rq.port = spec.port;
    rq.addr = dataplane::addrString(spec);
    Fd ring;
    const ipc::DelegateFlowReply r = calls_.openFlow(rq, &ring);
    return dataplane::EngineFlow{{r.flow, r.gen}, dataplane::FlowOrigin::Added,
                                 dataplane::FlowRing::adopt(std::move(ring)), {}};
}

void DelegatedXdp::removeFlow(const dataplane::FlowSpec&, const dataplane::FlowEntry& entry, bool)
{
    calls_.closeFlow(entry.id);
}

dataplane::FlowXdpStats DelegatedXdp::flowXdpStats(const dataplane::FlowSpec& spec,
                                                   const dataplane::FlowEntry& entry) const
{
    return calls_.flowStats(entry.id, spec.port).xdp; // npfd answers XDP's part
}

} // namespace npf
