#include "daemon/session.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "counters/engine_stats.h"
#include "counters/flow_stats.h"
#include "daemon/daemon.h"
#include "daemon/delegation.h"
#include "daemon/late_release.h"
#include "daemon/metrics.h"
#include "engine/service_stats.h"
#include "engine/service.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf::daemon {
namespace {

using ipc::ErrorCode;
using ipc::ProtocolError;

} // namespace

Peer Peer::of(int fd)
{
    Peer p;
    p.cred = ipc::peerCred(fd);
    try {
        p.cgroup = ipc::peerCgroup(p.cred.pid); // read now: the pid may be reused once it exits
    } catch (const std::exception&) {
        p.cgroup.clear();
    }
    p.netns = ipc::peerNetns(fd);
    return p;
}

Session::Session(Daemon& d, Fd fd, uint64_t id, Peer peer, Quotas::Lease lease, int64_t helloDeadline)
    : d_(d), fd_(std::move(fd)), id_(id), cred_(peer.cred), cgroup_(std::move(peer.cgroup)), netns_(peer.netns),
      pod_(std::move(peer.pod)), lease_(std::move(lease)), rule_(lease_.rule()), helloDeadline_(helloDeadline)
{
    NPF_INFO("client %llu connected: pid %d uid %u gid %u netns %llu%s%s%s%s", static_cast<unsigned long long>(id_),
             cred_.pid, cred_.uid, cred_.gid, static_cast<unsigned long long>(netns_),
             cgroup_.empty() ? "" : " cgroup ", cgroup_.c_str(), pod_ ? " " : "",
             pod_ ? pod_->describe().c_str() : "");
}

Session::~Session()
{
    for (OpenFlow& f : flows_)
        close(f);
    flows_.clear();
    if (region_) {
        faultServer_->service->removeRegion(*region_);
        region_.reset();
    }
    if (delegated_)
        delegated_->delegation->release(this);
}

std::string Session::describe() const
{
    return "client " + std::to_string(id_) + " (pid " + std::to_string(cred_.pid) + " uid " +
           std::to_string(cred_.uid) + (pod_ ? " " + pod_->describe() : "") + (name_.empty() ? "" : " " + name_) +
           ")";
}

Session::Step Session::serveOne() noexcept
{
    ipc::RecvResult r;
    try {
        r = ipc::recvMessage(fd_.get());
    } catch (const std::exception& e) { // oversized, too many descriptors: the message is gone
        ipc::lastWord(fd_.get(), ErrorCode::BadMessage, EMSGSIZE, e.what());
        ending_ = e.what();
        return Step::Gone;
    }
    if (r.status == ipc::IoStatus::WouldBlock)
        return Step::Idle;
    if (r.status == ipc::IoStatus::Eof) {
        ending_ = "hung up";
        return Step::Gone;
    }
    if (handle(std::move(r.message)))
        return Step::Served;
    ending_ = "disconnected";
    return Step::Ended;
}

bool Session::handle(ipc::WireMessage msg) noexcept
{
    uint32_t id = 0;
    bool keep = true;
    std::string out;
    std::vector<int> outFds;
    try {
        ipc::Message m = ipc::parse(msg.bytes);
        id = m.id;
        Call c{m.id, msg.fds, outFds};
        out = serve(m, c);
        if (out.empty())
            return true; // a populate: work() replies
        keep = m.type != ipc::ByeRequest::kType;
    } catch (const ProtocolError& e) {
        ipc::ErrorReply r = ipc::ErrorReply::from(e);
        out = r.encode(id ? id : e.id());
        // A client that breaks the protocol is disconnected (its flows
        // freed); one that asks for something it may not have is told so.
        keep = helloDone_ && e.code() != ErrorCode::BadMessage && e.code() != ErrorCode::BadVersion &&
               e.code() != ErrorCode::BadFd;
        NPF_WARN("%s: %s: %s%s", describe().c_str(), std::string(ipc::toString(e.code())).c_str(), e.what(),
                 keep ? "" : " (disconnected)");
    } catch (const std::exception& e) {
        out = ipc::ErrorReply{ErrorCode::Internal, EIO, e.what()}.encode(id);
        NPF_WARN("%s: %s", describe().c_str(), e.what());
    }
    return send(out, outFds) && keep;
}

// Decodes the request once, has its handler act on it, encodes the reply
// ("" for a populate in progress: work() replies). A request that carries
// descriptors it should not is refused before it is read.
template <typename Req, auto Handler>
std::string Session::serveAs(const ipc::Message& m, Call& c)
{
    if (Req::kFds == 0 && !c.fds.empty())
        throw ProtocolError(ErrorCode::BadFd, m.type + " takes no descriptors, got " + std::to_string(c.fds.size()));
    const auto reply = (this->*Handler)(Req::decode(m), c);
    if constexpr (requires { reply.has_value(); })
        return reply ? reply->encode(m.id) : std::string();
    else
        return reply.encode(m.id);
}

// Every request type npfd serves, and its handler: the one place a type is
// dispatched.
const Session::Route Session::kRoutes[] = {
    {ipc::HelloRequest::kType, &Session::serveAs<ipc::HelloRequest, &Session::hello>},
    {ipc::RegionRequest::kType, &Session::serveAs<ipc::RegionRequest, &Session::region>},
    {ipc::OpenFlowRequest::kType, &Session::serveAs<ipc::OpenFlowRequest, &Session::openFlow>},
    {ipc::CloseFlowRequest::kType, &Session::serveAs<ipc::CloseFlowRequest, &Session::closeFlow>},
    {ipc::ReleaseRequest::kType, &Session::serveAs<ipc::ReleaseRequest, &Session::release>},
    {ipc::PopulateRequest::kType, &Session::serveAs<ipc::PopulateRequest, &Session::populate>},
    {ipc::StatsRequest::kType, &Session::serveAs<ipc::StatsRequest, &Session::stats>},
    {ipc::FlowStatsRequest::kType, &Session::serveAs<ipc::FlowStatsRequest, &Session::flowStats>},
    {ipc::ByeRequest::kType, &Session::serveAs<ipc::ByeRequest, &Session::bye>},
    {ipc::DelegateRequest::kType, &Session::serveAs<ipc::DelegateRequest, &Session::delegate>},
    {ipc::QueueRequest::kType, &Session::serveAs<ipc::QueueRequest, &Session::queue>},
    {ipc::DelegateFlowRequest::kType, &Session::serveAs<ipc::DelegateFlowRequest, &Session::delegateFlow>},
};

std::string Session::serve(const ipc::Message& m, Call& c)
{
    if (d_.stopping())
        throw ProtocolError(ErrorCode::ShuttingDown, "npfd is stopping");
    if (!helloDone_ && m.type != ipc::HelloRequest::kType)
        throw ProtocolError(ErrorCode::BadMessage, "the first request must be hello, not " + m.type);
    for (const Route& r : kRoutes)
        if (m.type == r.type)
            return (this->*r.serve)(m, c);
    throw ProtocolError(ErrorCode::BadMessage, "unknown request type '" + m.type + "'");
}

bool Session::send(const std::string& out, const std::vector<int>& fds) noexcept
{
    try {
        if (ipc::sendMessage(fd_.get(), out, fds) != ipc::IoStatus::Ok) {
            NPF_WARN("%s does not take its replies: disconnected", describe().c_str());
            return false;
        }
    } catch (const std::exception& e) {
        NPF_WARN("%s: sending the reply: %s", describe().c_str(), e.what());
        return false;
    }
    return true;
}

Session::Work Session::work(bool* keep) noexcept
{
    *keep = true;
    Populate& p = *populate_;
    if (!p.pagers.empty()) {
        std::erase_if(p.pagers, [](const auto& w) { return w.first->pagersSynced(w.second); });
        if (!p.pagers.empty() && monotonicNs() < p.waitUntil)
            return Work::Waiting;
        // Bounded: a pager's round is (grace periods and client installs
        // have their limits), but nobody should wait on the data path
        // without end. Past it, populate goes on: a buffer not yet
        // protected that it evicts takes the fault path, placed all the same.
        if (!p.pagers.empty())
            NPF_WARN_RL("%s: populate: a pager did not end its round within 1 s; populating without waiting for it",
                        describe().c_str());
        p.pagers.clear();
    }
    const uint64_t slice = std::max<uint64_t>(kPopulateSlice, region_->pageSize());
    const uint64_t len = std::min(p.end - p.next, slice - p.next % slice);
    std::string out;
    if (len) {
        const int rc = region_->prefetch(p.next, len);
        if (rc < 0) {
            out = ipc::ErrorReply{ErrorCode::Internal, static_cast<uint32_t>(-rc), std::string("populate: ") + std::strerror(-rc)}.encode(p.id);
            NPF_WARN("%s: populate: %s", describe().c_str(), std::strerror(-rc));
        } else {
            p.installed += static_cast<uint64_t>(rc);
            p.next += len;
        }
    }
    if (out.empty() && p.next < p.end)
        return Work::Progress;
    if (out.empty())
        out = ipc::PagesReply{p.installed}.encode(p.id);
    populate_.reset();
    *keep = send(out, {});
    return Work::Done;
}

ipc::HelloReply Session::hello(const ipc::HelloRequest& h, Call&)
{
    if (helloDone_)
        throw ProtocolError(ErrorCode::BadMessage, "hello sent twice");
    const uint32_t protocol = ipc::negotiate(h);
    name_ = h.name;
    if (!rule_)
        throw ProtocolError(ErrorCode::NotAllowed,
                            "uid " + std::to_string(cred_.uid) + " gid " + std::to_string(cred_.gid) +
                                " matches no client rule of npfd's config",
                            EACCES);
    const std::string delegated = chooseMode(h.delegate != 0);
    helloDone_ = true;
    ipc::HelloReply r = ipc::helloReplyFor(protocol);
    r.delegated = delegated;
    r.daemonPid = static_cast<uint32_t>(::getpid());
    r.ifaces = d_.ifacesIn(netns_);
    r.limits = {rule_->regionBytes, rule_->residentBytes, rule_->flows};
    const Quotas::Use free = lease_.free();
    r.free = {free.regionBytes, free.residentBytes, free.flows};
    r.defaultBudget = lease_.defaultBudget();
    NPF_INFO("%s: hello%s (protocol %u, library ABI %u)%s%s", describe().c_str(),
             name_.empty() ? "" : (" from " + name_).c_str(), protocol, h.abi,
             delegated.empty() ? "" : ": runs the data path of ", delegated.c_str());
    return r;
}

ipc::RegionReply Session::region(const ipc::RegionRequest& rq, Call& c)
{
    std::vector<Fd>& fds = c.fds;
    if (region_ || bitmap_)
        throw ProtocolError(ErrorCode::BadMessage, "a connection has one region, and it has it");
    if (delegated_)
        throw ProtocolError(ErrorCode::BadMessage, "this connection runs the data path of " + delegated_->label +
                                                       " itself (delegated mode): its region is registered with "
                                                       "delegate, not region");
    Iface* server = d_.faultServer(netns_);
    if (!server)
        throw ProtocolError(ErrorCode::NotAllowed,
                            "npfd runs no data path this client can use: every interface it may name is "
                            "delegated (" + d_.describeIfaces() + ")",
                            ENODEV);
    // [2], [3]: the spill file, the install area.
    if (fds.size() < 2 || fds.size() > 4 || !ipc::isMemfd(fds[0].get()) || !ipc::isUserfaultfd(fds[1].get()) ||
        !std::all_of(fds.begin() + 2, fds.end(), [](const Fd& f) { return ipc::isMemfd(f.get()); }))
        throw ProtocolError(ErrorCode::BadFd,
                            "region takes a memfd, a userfaultfd and optionally a spill memfd and an install area "
                            "memfd");
    // The rule's totals first: the bitmap and the page state below cost
    // npfd memory in proportion to the size.
    const RegionGeometry geo = admitRegion(rq.size, rq.pageSize, rq.budget);
    RegionGiveBack giveBack{lease_}; // unless the region is made
    dataplane::ResidentMap bitmap = dataplane::ResidentMap::create(geo.bitmapPages());
    RegionConfig rc;
    rc.size = rq.size;
    rc.pageSize = rq.pageSize;
    rc.residentBudget = rq.budget;
    rc.residentBitmap = bitmap.words();
    rc.epochs = &d_.epochs();
    rc.spillDir = d_.config().spillDir;
    rc.name = "npfd-client-" + std::to_string(id_);
    rc.clientInstallWait = std::chrono::microseconds(d_.config().clientInstallWaitUs);
    std::unique_ptr<Region> region;
    try {
        region = std::make_unique<Region>(
            rc, ClientMemory{std::move(fds[0]), std::move(fds[1]), rq.base, fds.size() >= 3 ? std::move(fds[2]) : Fd(),
                             fds.size() == 4 ? std::move(fds[3]) : Fd()});
    } catch (const std::system_error& e) {
        if (e.code().value() == ENOMEM) // 2 MiB pages: the huge page pool is short
            throw ProtocolError(ErrorCode::NoSpace, e.what(), ENOMEM);
        throw ProtocolError(ErrorCode::BadFd, std::string("the region's descriptors: ") + e.what(), e.code().value());
    }
    giveBack.keep = true;
    bitmap_.emplace(std::move(bitmap));
    region_ = std::move(region);
    faultServer_ = server;
    faultServer_->service->addRegion(*region_);
    NPF_INFO("%s: region of %llu MiB, resident budget %llu MiB, %s pages, faults served by %s's pagers",
             describe().c_str(), static_cast<unsigned long long>(rq.size >> 20),
             static_cast<unsigned long long>(rq.budget >> 20), geo.huge() ? "2 MiB" : "4 KiB",
             faultServer_->label.c_str());
    return ipc::RegionReply{static_cast<uint32_t>(id_)};
}

RegionGeometry Session::admitRegion(uint64_t size, uint32_t pageSize, uint64_t budget)
{
    RegionGeometry geo;
    std::string bad;
    switch (RegionGeometry::check(size, pageSize, budget, kDefaultBatchPages, &geo, &bad)) {
    case RegionGeometry::Error::None:
        break;
    case RegionGeometry::Error::TooLarge:
        throw ProtocolError(ErrorCode::TooLarge, "region " + bad);
    default:
        throw ProtocolError(ErrorCode::BadMessage, "region " + bad, EINVAL);
    }
    if (std::string why; !lease_.takeRegion(size, budget, &why))
        throw ProtocolError(ErrorCode::TooLarge, why);
    return geo;
}

// The interface an open_flow names ("": the only one npfd serves in the
// client's network namespace).
Iface& Session::flowIface(const std::string& name) const
{
    std::string ifname = name;
    if (ifname.empty()) {
        const std::vector<std::string> here = d_.ifacesIn(netns_);
        if (here.size() != 1)
            throw ProtocolError(ErrorCode::BadMessage,
                                here.empty() ? "npfd serves no interface in this client's network namespace"
                                             : "npfd serves several interfaces here: name one");
        ifname = here.front();
    }
    Iface* itf = d_.iface(ifname, netns_);
    if (!itf)
        throw ProtocolError(ErrorCode::NotAllowed,
                            "npfd serves no " + ifname + " in this client's network namespace (it serves " +
                                d_.describeIfaces() + ")",
                            ENODEV);
    return *itf;
}

// The flow an open_flow asks for, if this client may have it: a port and
// address its rule allows, a pod client's on its pod's addresses only ("any"
// means the pod's first address, the kubelet's pod IP).
dataplane::FlowSpec Session::allowedFlow(uint16_t port, std::string addr) const
{
    if (pod_ && addr.empty())
        addr = pod_->addrs.front();
    dataplane::FlowSpec spec;
    try {
        spec = dataplane::parseFlowSpec(std::to_string(port), addr);
    } catch (const std::exception& e) {
        throw ProtocolError(ErrorCode::BadMessage, e.what(), EINVAL);
    }
    if (pod_ && !pod_->owns(addr))
        throw ProtocolError(ErrorCode::NotAllowed,
                            dataplane::toString(spec) + ": a client of " + pod_->describe() +
                                " opens flows on its pod's own addresses (" + pod_->addrList() + "), not " + addr,
                            EACCES);
    if (!rule_->allowsPort(port) || !rule_->allowsAddr(addr))
        throw ProtocolError(ErrorCode::NotAllowed, dataplane::toString(spec) + " is not allowed for this client",
                            EACCES);
    return spec;
}

ipc::OpenFlowReply Session::openFlow(const ipc::OpenFlowRequest& rq, Call& c)
{
    if (!region_)
        throw ProtocolError(ErrorCode::NoRegion, "open_flow before region");
    Iface* itf = &flowIface(rq.iface);
    Service* svc = itf->service.get();
    if (!svc)
        throw ProtocolError(ErrorCode::Busy,
                            itf->label + "'s data path is delegated: one client runs it, through delegate_flow",
                            EBUSY);
    const dataplane::FlowSpec spec = allowedFlow(rq.port, rq.addr);
    ServedFlow* flow = nullptr;
    admitFlow(*itf, spec, [&] {
        try {
            // A ring map nobody else has mapped, whatever was there before.
            CreditConfig credits;
            if (rq.creditStep) {
                credits.enabled = true;
                credits.step = rq.creditStep;
                if (rq.creditIntervalUs)
                    credits.interval = std::chrono::microseconds(rq.creditIntervalUs);
            }
            flow = &svc->openFlow(spec, *region_, dataplane::RegionBinding{bitmap_->fd(), region_->size()}, true,
                                  credits);
        } catch (const StateError& e) {
            throw ProtocolError(e.code().value() == ENOSPC ? ErrorCode::NoSpace : ErrorCode::Busy, e.what(),
                                e.code().value());
        }
        return OpenFlow{itf, flow, spec, {flow->id, flow->gen}, std::nullopt};
    });
    NPF_INFO("%s: flow %u: %s on %s", describe().c_str(), flow->id, dataplane::toString(spec).c_str(),
             itf->label.c_str());
    ipc::OpenFlowReply r;
    r.flow = flow->id;
    r.gen = flow->gen;
    r.port = spec.port;
    r.completionEntries = flow->ring.size();
    c.outFds = {flow->ringMap.fd(), flow->ring.memfd(), flow->ring.notifyFd()};
    return r;
}

Session::OpenFlow& Session::admitFlow(Iface& itf, const dataplane::FlowSpec& spec,
                                      const std::function<OpenFlow()>& open)
{
    const std::string& iface = itf.label;
    // The refusal names no other client (a tenant learns nothing of
    // another); npfd's log does, for the operator.
    if (const Session* owner = d_.flowClaims().claim(itf, spec, this)) {
        if (owner != this)
            NPF_INFO("%s: %s on %s refused: it overlaps a flow of %s", describe().c_str(),
                     dataplane::toString(spec).c_str(), iface.c_str(), owner->describe().c_str());
        throw ProtocolError(ErrorCode::Busy,
                            dataplane::toString(spec) + " on " + iface + " is held by " +
                                (owner == this ? std::string("this connection") : std::string("another client")) +
                                " (the same address, or a wildcard and an address, of the port)");
    }
    struct Undo { // unless the flow is opened
        Session& s;
        Iface& itf;
        const dataplane::FlowSpec& spec;
        bool leased = false, keep = false;
        ~Undo()
        {
            if (keep)
                return;
            s.d_.flowClaims().release(itf, spec);
            if (leased)
                s.lease_.giveFlow();
        }
    } undo{*this, itf, spec};
    if (std::string why; !lease_.takeFlow(&why))
        throw ProtocolError(ErrorCode::NoSpace, why);
    undo.leased = true;
    flows_.push_back(open());
    undo.keep = true;
    return flows_.back();
}

void Session::close(OpenFlow& f) noexcept
{
    const uint32_t id = f.entry.id;
    if (f.flow) {
        f.iface->service->closeFlow(*f.flow);
    } else { // delegated: XDP passes its datagrams from now on (the client serves it no more)
        try {
            dataplane::delFlow(f.iface->delegation->dp(), f.spec, f.entry);
        } catch (const std::exception& e) {
            NPF_WARN("%s: removing flow %u: %s", describe().c_str(), id, e.what());
        }
    }
    d_.flowClaims().release(*f.iface, f.spec);
    lease_.giveFlow();
    NPF_INFO("%s: flow %u closed", describe().c_str(), id);
}

const Session::OpenFlow& Session::ownFlow(uint32_t id) const
{
    for (const OpenFlow& f : flows_)
        if (f.entry.id == id)
            return f;
    // The same answer whoever holds the id, if anyone: nothing about another
    // client's flow is told.
    throw ProtocolError(ErrorCode::NoFlow, "no flow " + std::to_string(id) + " on this connection");
}

ipc::OkReply Session::closeFlow(const ipc::CloseFlowRequest& rq, Call&)
{
    const OpenFlow& f = ownFlow(rq.flow);
    const auto it = flows_.begin() + (&f - flows_.data());
    close(*it);
    flows_.erase(it);
    return {};
}

ipc::OkReply Session::bye(const ipc::ByeRequest&, Call&) { return {}; }

// [offset, offset + len) of the region, which release and populate need.
void Session::checkRange(const char* what, uint64_t offset, uint64_t len) const
{
    if (delegated_)
        throw ProtocolError(ErrorCode::BadMessage, std::string(what) + ": this connection's region is in its own "
                                                                       "process (delegated mode): its engine does it");
    if (!region_)
        throw ProtocolError(ErrorCode::NoRegion, std::string(what) + " before region");
    if (offset > region_->size() || len > region_->size() - offset)
        throw ProtocolError(ErrorCode::BadMessage,
                            std::string(what) + " [" + std::to_string(offset) + ", +" + std::to_string(len) +
                                ") is outside the region of " + std::to_string(region_->size()) + " bytes",
                            EINVAL);
}

ipc::PagesReply Session::release(const ipc::ReleaseRequest& rq, Call&)
{
    checkRange("release", rq.offset, rq.len);
    return {releaseLate(rq.offset, rq.len, rq.posted)};
}

std::optional<ipc::PagesReply> Session::populate(const ipc::PopulateRequest& rq, Call& c)
{
    checkRange("populate", rq.offset, rq.len);
    uint64_t len = rq.len;
    // No more than the budget: beyond it, populating evicts what it just
    // installed, and the control thread (every client's) would spend the
    // time on it.
    if (region_->budgetPages())
        len = std::min(len, region_->budgetPages() * region_->pageSize());
    // populate evicts to the budget: every buffer the client posted before
    // it is protected first (the pagers protect a client's posts), so it
    // starts once their rounds have ended. release evicts nothing, and a
    // page written after it keeps its content however late its protection
    // comes (a write clears the release mark): no wait.
    Populate p{c.id, rq.offset, rq.offset + len, 0, {}, monotonicNs() + 1'000'000'000};
    for (const OpenFlow& f : flows_)
        if (f.flow)
            p.pagers.emplace_back(f.iface->service.get(), f.iface->service->askPagers());
    populate_ = std::move(p);
    return std::nullopt;
}

// The release, applied now, leaves out the buffers the client posted since
// it made it (late_release.h); a client of an older library sends no
// `posted`: its whole range, as it asked.
uint64_t Session::releaseLate(uint64_t offset, uint64_t len, std::span<const ipc::ReleaseRequest::Posted> posted)
{
    std::vector<PostsSince> since;
    for (const ipc::ReleaseRequest::Posted& p : posted)
        for (const OpenFlow& f : flows_)
            if (f.flow && f.flow->id == p.flow)
                since.push_back({f.flow->posts, p.prod});
    const std::optional<std::vector<ByteRange>> parts = lateRelease(offset, len, since);
    uint64_t pages = 0;
    for (const ByteRange& r : parts.value_or(std::vector<ByteRange>{})) {
        const int rc = region_->release(r.offset, r.len);
        if (rc < 0)
            throw ProtocolError(ErrorCode::Internal, std::string("release: ") + std::strerror(-rc), -rc);
        pages += static_cast<uint64_t>(rc);
    }
    return pages;
}

void Session::clientFlows(std::vector<ClientFlow>& out) const
{
    for (const OpenFlow& f : flows_)
        out.push_back({f.iface->label, f.spec.port, name_.empty() ? "uid " + std::to_string(cred_.uid) : name_,
                       cred_.uid, statsOf(f)});
}

ipc::FlowStatsReply Session::flowStats(const ipc::FlowStatsRequest& rq, Call&)
{
    const OpenFlow& f = ownFlow(rq.flow);
    FlowStats s;
    try {
        s = statsOf(f);
    } catch (const std::system_error& e) { // the per-flow counters' map could not be read
        throw ProtocolError(ErrorCode::Internal, "flow " + std::to_string(rq.flow) + ": " + e.what(),
                            e.code().value());
    }
    return {counters::flowStatsJson(s)};
}

ipc::StatsReply Session::stats(const ipc::StatsRequest&, Call&)
{
    // This client's own numbers: its flows' completions, its region. The
    // counters of the shared dataplane (fast/fault path, sockets) are the
    // operator's (npfctl stats).
    EngineStats s;
    const std::vector<std::string> here = d_.ifacesIn(netns_);
    std::string iface = here.empty() ? "" : here.front();
    SequencerStats q;
    for (const OpenFlow& f : flows_) {
        if (f.flow)
            q += f.flow->seq.stats();
        iface = f.iface->ifname;
    }
    addCompletions(s, q);
    // Per client, the fault path is what completed with NPF_CF_FAULT.
    s.faultPath = q.fault;
    s.fastPath = q.ok + q.truncated - std::min(q.fault, q.ok + q.truncated);
    const RegionStats region = region_ ? region_->stats() : RegionStats{};
    if (region_)
        addRegionCounters(s, region, region_->pageSize());
    ipc::StatsReply r;
    r.stats = counters::engineStatsJson(s, iface, cred_.pid, monotonicNs());
    counters::addRegionStats(r.stats, region);
    return r;
}

} // namespace npf::daemon
