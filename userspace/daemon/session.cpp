#include "daemon/session.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "counters/engine_stats.h"
#include "counters/flow_stats.h"
#include "daemon/daemon.h"
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
}

std::string Session::describe() const
{
    return "client " + std::to_string(id_) + " (pid " + std::to_string(cred_.pid) + " uid " +
           std::to_string(cred_.uid) + (pod_ ? " " + pod_->describe() : "") + (name_.empty() ? "" : " " + name_) +
           ")";
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
        out = reply(m, msg.fds, outFds);
        if (out.empty())
            return true; // a populate: work() replies
        keep = m.type != "bye";
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

std::string Session::reply(const ipc::Message& m, std::vector<Fd>& fds, std::vector<int>& outFds)
{
    if (d_.stopping())
        throw ProtocolError(ErrorCode::ShuttingDown, "npfd is stopping", 0, m.id);
    if (!helloDone_ && m.type != ipc::HelloRequest::kType)
        throw ProtocolError(ErrorCode::BadMessage, "the first request must be hello, not " + m.type, 0, m.id);
    if (m.type == ipc::HelloRequest::kType)
        return hello(m);
    if (m.type == ipc::RegionRequest::kType)
        return region(m, fds);
    if (!fds.empty())
        throw ProtocolError(ErrorCode::BadFd, m.type + " takes no descriptors, got " + std::to_string(fds.size()), 0,
                            m.id);
    if (m.type == ipc::OpenFlowRequest::kType)
        return openFlow(m, outFds);
    if (m.type == ipc::CloseFlowRequest::kType)
        return closeFlow(m);
    if (m.type == ipc::ReleaseRequest::kType)
        return pages(m, true);
    if (m.type == ipc::PopulateRequest::kType)
        return pages(m, false);
    if (m.type == ipc::StatsRequest::kType)
        return stats(m);
    if (m.type == ipc::FlowStatsRequest::kType)
        return flowStats(m);
    if (m.type == ipc::ByeRequest::kType)
        return ipc::OkReply{}.encode(m.id);
    throw ProtocolError(ErrorCode::BadMessage, "unknown request type '" + m.type + "'", 0, m.id);
}

std::string Session::hello(const ipc::Message& m)
{
    if (helloDone_)
        throw ProtocolError(ErrorCode::BadMessage, "hello sent twice", 0, m.id);
    ipc::HelloRequest h = ipc::HelloRequest::decode(m);
    const uint32_t protocol = ipc::negotiate(h);
    name_ = h.name;
    if (!rule_)
        throw ProtocolError(ErrorCode::NotAllowed,
                            "uid " + std::to_string(cred_.uid) + " gid " + std::to_string(cred_.gid) +
                                " matches no client rule of npfd's config",
                            EACCES, m.id);
    helloDone_ = true;
    ipc::HelloReply r = ipc::helloReplyFor(protocol);
    r.daemonPid = static_cast<uint32_t>(::getpid());
    r.ifaces = d_.ifacesIn(netns_);
    r.limits = {rule_->regionBytes, rule_->residentBytes, rule_->flows};
    NPF_INFO("%s: hello%s (protocol %u, library ABI %u)", describe().c_str(),
             name_.empty() ? "" : (" from " + name_).c_str(), protocol, h.abi);
    return r.encode(m.id);
}

std::string Session::region(const ipc::Message& m, std::vector<Fd>& fds)
{
    ipc::RegionRequest rq = ipc::RegionRequest::decode(m);
    if (region_)
        throw ProtocolError(ErrorCode::BadMessage, "a connection has one region, and it has it", 0, m.id);
    // [2], [3]: the spill file, the install area.
    if (fds.size() < 2 || fds.size() > 4 || !ipc::isMemfd(fds[0].get()) || !ipc::isUserfaultfd(fds[1].get()) ||
        !std::all_of(fds.begin() + 2, fds.end(), [](const Fd& f) { return ipc::isMemfd(f.get()); }))
        throw ProtocolError(ErrorCode::BadFd,
                            "region takes a memfd, a userfaultfd and optionally a spill memfd and an install area "
                            "memfd",
                            0, m.id);
    RegionGeometry geo;
    std::string bad;
    switch (RegionGeometry::check(rq.size, rq.pageSize, rq.budget, kDefaultBatchPages, &geo, &bad)) {
    case RegionGeometry::Error::None:
        break;
    case RegionGeometry::Error::TooLarge:
        throw ProtocolError(ErrorCode::TooLarge, "region " + bad, 0, m.id);
    default:
        throw ProtocolError(ErrorCode::BadMessage, "region " + bad, EINVAL, m.id);
    }
    // The rule's totals first: the bitmap and the page state below cost
    // npfd memory in proportion to the size.
    if (std::string why; !lease_.takeRegion(rq.size, rq.budget, &why))
        throw ProtocolError(ErrorCode::TooLarge, why, 0, m.id);
    struct GiveBack { // unless the region is made
        Quotas::Lease& l;
        bool keep = false;
        ~GiveBack() { if (!keep) l.giveRegion(); }
    } giveBack{lease_};
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
            throw ProtocolError(ErrorCode::NoSpace, e.what(), ENOMEM, m.id);
        throw ProtocolError(ErrorCode::BadFd, std::string("the region's descriptors: ") + e.what(),
                            e.code().value(), m.id);
    }
    giveBack.keep = true;
    bitmap_.emplace(std::move(bitmap));
    region_ = std::move(region);
    faultServer_ = &d_.faultServer(netns_);
    faultServer_->service->addRegion(*region_);
    NPF_INFO("%s: region of %llu MiB, resident budget %llu MiB, %s pages, faults served by %s's pagers",
             describe().c_str(), static_cast<unsigned long long>(rq.size >> 20),
             static_cast<unsigned long long>(rq.budget >> 20), geo.huge() ? "2 MiB" : "4 KiB",
             faultServer_->label.c_str());
    return ipc::RegionReply{static_cast<uint32_t>(id_)}.encode(m.id);
}

std::string Session::openFlow(const ipc::Message& m, std::vector<int>& outFds)
{
    ipc::OpenFlowRequest rq = ipc::OpenFlowRequest::decode(m);
    if (!region_)
        throw ProtocolError(ErrorCode::NoRegion, "open_flow before region", 0, m.id);
    std::string ifname = rq.iface;
    if (ifname.empty()) {
        const std::vector<std::string> here = d_.ifacesIn(netns_);
        if (here.size() != 1)
            throw ProtocolError(ErrorCode::BadMessage,
                                here.empty() ? "npfd serves no interface in this client's network namespace"
                                             : "npfd serves several interfaces here: name one",
                                0, m.id);
        ifname = here.front();
    }
    Iface* itf = d_.iface(ifname, netns_);
    if (!itf)
        throw ProtocolError(ErrorCode::NotAllowed,
                            "npfd serves no " + ifname + " in this client's network namespace (it serves " +
                                d_.describeIfaces() + ")",
                            ENODEV, m.id);
    Service* svc = itf->service.get();
    const std::string& iface = itf->label;
    // A pod's client receives on its pod's addresses only: "any" means the
    // pod's first address (the kubelet's pod IP), another address is refused.
    if (pod_ && rq.addr.empty())
        rq.addr = pod_->addrs.front();
    dataplane::FlowSpec spec;
    try {
        spec = dataplane::parseFlowSpec(std::to_string(rq.port), rq.addr);
    } catch (const std::exception& e) {
        throw ProtocolError(ErrorCode::BadMessage, e.what(), EINVAL, m.id);
    }
    if (pod_ && !pod_->owns(rq.addr))
        throw ProtocolError(ErrorCode::NotAllowed,
                            dataplane::toString(spec) + ": a client of " + pod_->describe() +
                                " opens flows on its pod's own addresses (" + pod_->addrList() + "), not " + rq.addr,
                            EACCES, m.id);
    if (!rule_->allowsPort(rq.port) || !rule_->allowsAddr(rq.addr))
        throw ProtocolError(ErrorCode::NotAllowed, dataplane::toString(spec) + " is not allowed for this client", EACCES,
                            m.id);
    // The refusal names no other client (a tenant learns nothing of
    // another); npfd's log does, for the operator.
    if (const Session* owner = d_.flowClaims().claim(*itf, spec, this)) {
        if (owner != this)
            NPF_INFO("%s: %s on %s refused: it overlaps a flow of %s", describe().c_str(),
                     dataplane::toString(spec).c_str(), iface.c_str(), owner->describe().c_str());
        throw ProtocolError(ErrorCode::Busy,
                            dataplane::toString(spec) + " on " + iface + " is held by " +
                                (owner == this ? std::string("this connection") : std::string("another client")) +
                                " (the same address, or a wildcard and an address, of the port)",
                            0, m.id);
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
    } undo{*this, *itf, spec};
    if (std::string why; !lease_.takeFlow(&why))
        throw ProtocolError(ErrorCode::NoSpace, why, 0, m.id);
    undo.leased = true;
    ServedFlow* flow = nullptr;
    try {
        // A ring map nobody else has mapped, whatever was there before.
        flow = &svc->openFlow(spec, *region_, dataplane::RegionBinding{bitmap_->fd(), region_->size()}, true);
    } catch (const StateError& e) {
        throw ProtocolError(e.code().value() == ENOSPC ? ErrorCode::NoSpace : ErrorCode::Busy, e.what(),
                            e.code().value(), m.id);
    }
    flows_.push_back({itf, flow, spec});
    undo.keep = true;
    NPF_INFO("%s: flow %u: %s on %s", describe().c_str(), flow->id, dataplane::toString(spec).c_str(), iface.c_str());
    ipc::OpenFlowReply r;
    r.flow = flow->id;
    r.gen = flow->gen;
    r.port = spec.port;
    r.completionEntries = flow->ring.size();
    outFds = {flow->ringMap.fd(), flow->ring.memfd(), flow->ring.notifyFd()};
    return r.encode(m.id);
}

void Session::close(OpenFlow& f) noexcept
{
    const uint32_t id = f.flow->id;
    f.iface->service->closeFlow(*f.flow);
    d_.flowClaims().release(*f.iface, f.spec);
    lease_.giveFlow();
    NPF_INFO("%s: flow %u closed", describe().c_str(), id);
}

const Session::OpenFlow& Session::ownFlow(uint32_t id, uint32_t requestId) const
{
    for (const OpenFlow& f : flows_)
        if (f.flow->id == id)
            return f;
    // The same answer whoever holds the id, if anyone: nothing about another
    // client's flow is told.
    throw ProtocolError(ErrorCode::NoFlow, "no flow " + std::to_string(id) + " on this connection", 0, requestId);
}

std::string Session::closeFlow(const ipc::Message& m)
{
    ipc::CloseFlowRequest rq = ipc::CloseFlowRequest::decode(m);
    const OpenFlow& f = ownFlow(rq.flow, m.id);
    const auto it = flows_.begin() + (&f - flows_.data());
    close(*it);
    flows_.erase(it);
    return ipc::OkReply{}.encode(m.id);
}

std::string Session::pages(const ipc::Message& m, bool release)
{
    uint64_t offset, len;
    std::vector<ipc::ReleaseRequest::Posted> posted;
    if (release) {
        ipc::ReleaseRequest rq = ipc::ReleaseRequest::decode(m);
        offset = rq.offset, len = rq.len;
        posted = std::move(rq.posted);
    } else {
        ipc::PopulateRequest rq = ipc::PopulateRequest::decode(m);
        offset = rq.offset, len = rq.len;
    }
    if (!region_)
        throw ProtocolError(ErrorCode::NoRegion, m.type + " before region", 0, m.id);
    if (offset > region_->size() || len > region_->size() - offset)
        throw ProtocolError(ErrorCode::BadMessage,
                            m.type + " [" + std::to_string(offset) + ", +" + std::to_string(len) +
                                ") is outside the region of " + std::to_string(region_->size()) + " bytes",
                            EINVAL, m.id);
    if (release)
        return ipc::PagesReply{releaseLate(m, offset, len, posted)}.encode(m.id);
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
    Populate p{m.id, offset, offset + len, 0, {}, monotonicNs() + 1'000'000'000};
    for (const OpenFlow& f : flows_)
        p.pagers.emplace_back(f.iface->service.get(), f.iface->service->askPagers());
    populate_ = std::move(p);
    return "";
}

// The release, applied now, leaves out the buffers the client posted since
// it made it (late_release.h); a client of an older library sends no
// `posted`: its whole range, as it asked.
uint64_t Session::releaseLate(const ipc::Message& m, uint64_t offset, uint64_t len,
                              std::span<const ipc::ReleaseRequest::Posted> posted)
{
    std::vector<PostsSince> since;
    for (const ipc::ReleaseRequest::Posted& p : posted)
        for (const OpenFlow& f : flows_)
            if (f.flow->id == p.flow)
                since.push_back({f.flow->posts, p.prod});
    const std::optional<std::vector<ByteRange>> parts = lateRelease(offset, len, since);
    uint64_t pages = 0;
    for (const ByteRange& r : parts.value_or(std::vector<ByteRange>{})) {
        const int rc = region_->release(r.offset, r.len);
        if (rc < 0)
            throw ProtocolError(ErrorCode::Internal, m.type + ": " + std::strerror(-rc), -rc, m.id);
        pages += static_cast<uint64_t>(rc);
    }
    return pages;
}

void Session::clientFlows(std::vector<ClientFlow>& out) const
{
    for (const OpenFlow& f : flows_)
        out.push_back({f.iface->label, f.flow->spec.port, name_.empty() ? "uid " + std::to_string(cred_.uid) : name_,
                       cred_.uid, f.iface->service->flowStats(*f.flow)});
}

std::string Session::flowStats(const ipc::Message& m)
{
    const ipc::FlowStatsRequest rq = ipc::FlowStatsRequest::decode(m);
    const OpenFlow& f = ownFlow(rq.flow, m.id);
    FlowStats s;
    try {
        s = f.iface->service->flowStats(*f.flow);
    } catch (const std::system_error& e) { // the per-flow counters' map could not be read
        throw ProtocolError(ErrorCode::Internal, "flow " + std::to_string(rq.flow) + ": " + e.what(),
                            e.code().value(), m.id);
    }
    return ipc::FlowStatsReply{counters::flowStatsJson(s)}.encode(m.id);
}

std::string Session::stats(const ipc::Message& m)
{
    (void)ipc::StatsRequest::decode(m);
    // This client's own numbers: its flows' completions, its region. The
    // counters of the shared dataplane (fast/fault path, sockets) are the
    // operator's (npfctl stats).
    EngineStats s;
    const std::vector<std::string> here = d_.ifacesIn(netns_);
    std::string iface = here.empty() ? "" : here.front();
    SequencerStats q;
    for (const OpenFlow& f : flows_) {
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
    return r.encode(m.id);
}

} // namespace npf::daemon
