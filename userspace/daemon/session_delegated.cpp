// The requests of a client in delegated mode (docs/protocol.md, "Delegated
// mode"): npfd hands it the data path of one interface -- every queue's
// sockets over a UMEM of npfd's, its region's resident bitmap, each flow's
// post ring -- and keeps the flows' entries, the limits and the teardown.
#include <cstring>
#include <optional>

#include "daemon/daemon.h"
#include "daemon/delegation.h"
#include "daemon/session.h"
#include "dataplane/stats.h"
#include "engine/service.h"
#include "region/geometry.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/netns.h"

namespace npf::daemon {

using ipc::ErrorCode;
using ipc::ProtocolError;

std::string Session::chooseMode(bool offered)
{
    std::vector<Iface*> delegated;
    bool brokered = false;
    for (const std::string& name : d_.ifacesIn(netns_))
        if (Iface* itf = d_.iface(name, netns_))
            (itf->delegation ? delegated.push_back(itf) : (void)(brokered = true));
    if (delegated.empty())
        return "";
    if (offered)
        for (Iface* itf : delegated)
            if (itf->delegation->reserve(this)) {
                delegated_ = itf;
                return itf->ifname;
            }
    if (brokered)
        return ""; // its flows go on the brokered interfaces
    if (!offered)
        throw ProtocolError(ErrorCode::NotAllowed,
                            "npfd delegates the data path of " + delegated.front()->label +
                                " to its client, and this client does not run one (npf::Client runs it in mode "
                                "Auto or Delegated)",
                            EACCES);
    // The refusal names no other client; the log does, for the operator.
    NPF_INFO("%s: refused: %s is delegated to another client", describe().c_str(), delegated.front()->label.c_str());
    throw ProtocolError(ErrorCode::Busy,
                        delegated.front()->label + " is delegated to another client: npfd hands its data path to "
                                                   "one client at a time",
                        EBUSY);
}

ipc::DelegateReply Session::delegate(const ipc::DelegateRequest& rq, Call& c)
{
    if (!delegated_)
        throw ProtocolError(ErrorCode::BadMessage,
                            "delegate: this connection is brokered (its hello reply named no delegated interface)");
    if (bitmap_)
        throw ProtocolError(ErrorCode::BadMessage, "a connection has one region, and it has it");
    // The region is the client's memory, but its size and budget are what
    // the rule bounds, as for a brokered one.
    const RegionGeometry geo = admitRegion(rq.size, rq.pageSize, rq.budget);
    RegionGiveBack giveBack{lease_}; // unless the data path is handed over
    dataplane::ResidentMap bitmap = dataplane::ResidentMap::create(geo.bitmapPages());
    Delegation& del = *delegated_->delegation;
    try {
        std::optional<NetnsScope> in; // the sockets are the interface's namespace's
        if (delegated_->netnsFd)
            in.emplace(delegated_->netnsFd.get(), "of " + delegated_->label);
        del.bind();
    } catch (const std::system_error& e) {
        throw ProtocolError(e.code().value() == EBUSY ? ErrorCode::Busy : ErrorCode::Internal, e.what(),
                            e.code().value());
    }
    giveBack.keep = true;
    bitmap_.emplace(std::move(bitmap));
    delegatedSize_ = rq.size;
    const xsk::QueueConfig& q0 = del.queue(0).config();
    ipc::DelegateReply r;
    r.iface = delegated_->ifname;
    r.ifindex = static_cast<uint32_t>(del.dp().ifindex());
    r.progId = del.dp().progId();
    r.queues = del.queues();
    r.frameSize = q0.umem.frameSize;
    r.frameCount = q0.umem.frameCount;
    r.fillSize = q0.umem.fillSize ? q0.umem.fillSize : xsk::defaultFillSize(q0.umem.frameCount);
    r.compSize = q0.umem.compSize;
    r.rxSize = q0.primaryRxSize;
    r.framesPerPacket = del.sizes().framesPerPacket;
    r.multiBuffer = q0.multiBuffer ? 1 : 0;
    c.outFds = {bitmap_->fd()};
    NPF_INFO("%s: runs the data path of %s: %u queues, region of %llu MiB, resident budget %llu MiB, %s pages",
             describe().c_str(), delegated_->label.c_str(), r.queues, static_cast<unsigned long long>(rq.size >> 20),
             static_cast<unsigned long long>(rq.budget >> 20), geo.huge() ? "2 MiB" : "4 KiB");
    return r;
}

ipc::QueueReply Session::queue(const ipc::QueueRequest& rq, Call& c)
{
    if (!delegated_ || !bitmap_)
        throw ProtocolError(ErrorCode::NoRegion, "queue before delegate");
    const Delegation& del = *delegated_->delegation;
    if (rq.queue >= del.queues())
        throw ProtocolError(ErrorCode::BadMessage,
                            "queue " + std::to_string(rq.queue) + ": " + delegated_->label + " has " +
                                std::to_string(del.queues()),
                            EINVAL);
    const xsk::DelegatedQueue& q = del.queue(rq.queue);
    c.outFds = {q.umemFd(), q.primaryFd(), q.backupFd()};
    return {};
}

ipc::DelegateFlowReply Session::delegateFlow(const ipc::DelegateFlowRequest& rq, Call& c)
{
    if (!delegated_ || !bitmap_)
        throw ProtocolError(ErrorCode::NoRegion, "delegate_flow before delegate");
    Iface& itf = *delegated_;
    const dataplane::FlowSpec spec = allowedFlow(rq.port, rq.addr);
    OpenFlow& f = admitFlow(itf, spec, [&] {
        try {
            // A ring map nobody else has mapped, whatever was there before.
            dataplane::EngineFlow ef = dataplane::openEngineFlow(
                itf.delegation->dp(), spec, dataplane::RegionBinding{bitmap_->fd(), delegatedSize_}, true);
            return OpenFlow{&itf, nullptr, spec, ef.entry, std::move(ef.ring)};
        } catch (const StateError& e) {
            throw ProtocolError(e.code().value() == ENOSPC ? ErrorCode::NoSpace : ErrorCode::Busy, e.what(),
                                e.code().value());
        }
    });
    NPF_INFO("%s: flow %u: %s on %s (delegated)", describe().c_str(), f.entry.id, dataplane::toString(spec).c_str(),
             itf.label.c_str());
    ipc::DelegateFlowReply r;
    r.flow = f.entry.id;
    r.gen = f.entry.gen;
    r.port = spec.port;
    c.outFds = {f.ring->fd()};
    return r;
}

// A flow's accounting: npfd's engine's for a brokered flow; XDP's counts
// alone for a delegated one (the rest is its client's engine's).
FlowStats Session::statsOf(const OpenFlow& f) const
{
    if (f.flow)
        return f.iface->service->flowStats(*f.flow);
    FlowStats s;
    s.xdp = dataplane::readFlowXdpStats(f.iface->delegation->dp(), f.entry.id, f.entry.gen);
    return s;
}

} // namespace npf::daemon
