// One connected npfd client: its credentials and rule, its region (its
// memfd + userfaultfd, adopted by a Region, and the resident bitmap XDP
// reads), its flows. Requests are handled one at a time on the daemon's
// control thread; every one gets exactly one reply.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dataplane/flow_ring.h"
#include "dataplane/flows.h"
#include "daemon/quota.h"
#include "ipc/pods.h"
#include "ipc/protocol.h"
#include "ipc/unix_socket.h"
#include "npf/counters.h"
#include "region/geometry.h"
#include "region/region.h"
#include "sys/fd.h"

namespace npf {

class Service;
class ServedFlow;

namespace daemon {

class Daemon;
struct Iface;
struct ClientFlow;

// Who is at the other end of a connection, read when npfd accepts it.
struct Peer {
    ipc::PeerCred cred{};
    std::string cgroup; // cgroup v2 path, "" when unknown
    uint64_t netns = 0; // its network namespace (cookie): the interfaces it may name
    std::shared_ptr<const ipc::PodInfo> pod; // the pod whose listener it came through; null: npfd's socket
    // Throws when the client is gone already.
    static Peer of(int fd);
};

class Session {
public:
    // `lease`: what the client's rule lets this connection hold (the rule
    // that admitted it; none: hello is refused). `helloDeadline`: monotonic
    // ns by which hello must have come.
    Session(Daemon& d, Fd fd, uint64_t id, Peer peer, Quotas::Lease lease, int64_t helloDeadline);
    ~Session(); // closes its flows, then its region
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    int fd() const noexcept { return fd_.get(); }
    const std::shared_ptr<const ipc::PodInfo>& pod() const noexcept { return pod_; }
    bool helloDone() const noexcept { return helloDone_; }
    int64_t helloDeadline() const noexcept { return helloDeadline_; }
    // The client's socket is read here and its replies written here: one
    // request of it, if it has one, read, decoded once, served by its
    // handler and answered. Idle: none waiting; Served; Ended: served, and
    // the connection must end (a protocol violation, bye); Gone: the client
    // hung up, or sent what could not be read. ending() says why for the
    // last two. Never throws.
    enum class Step { Idle, Served, Ended, Gone };
    Step serveOne() noexcept;
    const std::string& ending() const noexcept { return ending_; }
    // A populate is in progress: the control thread works on it in slices
    // (work()), between other clients' requests, and reads no request of
    // this client's meanwhile (its replies stay in order).
    bool working() const noexcept { return populate_.has_value(); }
    enum class Work { Waiting, Progress, Done };
    // One slice of it: Waiting (for the pagers' rounds), Progress (pages
    // installed), Done (its reply sent; *keep false when the connection must
    // end: the client does not take its replies).
    Work work(bool* keep) noexcept;
    // The client hung up or is gone: why, for the log.
    std::string describe() const;
    // Its open flows, each with its accounting, for the metrics (control
    // thread's lock held).
    void clientFlows(std::vector<ClientFlow>& out) const;

private:
    struct OpenFlow {
        Iface* iface;
        ServedFlow* flow;         // brokered: npfd's side; delegated: nullptr (the client serves it)
        dataplane::FlowSpec spec; // as claimed in the daemon's FlowClaims
        dataplane::FlowEntry entry;
        std::optional<dataplane::FlowRing> ring; // delegated: its post ring map, handed over
    };

    // A populate, between slices.
    struct Populate {
        uint32_t id;         // the request's
        uint64_t next, end;  // region bytes still to install
        uint64_t installed;  // pages, so far
        // The pagers' rounds it waits for first (they protect the buffers
        // the client posted before it), at most until waitUntil (monotonic ns).
        std::vector<std::pair<Service*, std::vector<uint64_t>>> pagers;
        uint64_t waitUntil;
    };
    // At most this many bytes a slice (a 2 MiB page at least): a few ms of
    // installs at 4 KiB pages.
    static constexpr uint64_t kPopulateSlice = 256 << 10;

    // One request's id, the descriptors it carried (a handler takes what it
    // keeps) and those its reply carries.
    struct Call {
        uint32_t id;
        std::vector<Fd>& fds;
        std::vector<int>& outFds;
    };
    // Handles one message; false when the connection must end.
    bool handle(ipc::WireMessage msg) noexcept;
    // The reply to `m`, "" for a populate in progress (work() replies when
    // it ends); throws ProtocolError for a refusal or a bad request.
    std::string serve(const ipc::Message& m, Call& c);
    // Request type Req decoded, served by Handler (Req::Reply handler(const
    // Req&, Call&), or an optional reply: none yet), the reply encoded.
    template <typename Req, auto Handler>
    std::string serveAs(const ipc::Message& m, Call& c);
    struct Route {
        std::string_view type;
        std::string (Session::*serve)(const ipc::Message&, Call&);
    };
    static const Route kRoutes[];
    bool send(const std::string& out, const std::vector<int>& fds) noexcept; // false: the client is not taking it

    // The handlers, one per request type (kRoutes).
    ipc::HelloReply hello(const ipc::HelloRequest& rq, Call& c);
    ipc::RegionReply region(const ipc::RegionRequest& rq, Call& c);
    ipc::OpenFlowReply openFlow(const ipc::OpenFlowRequest& rq, Call& c);
    ipc::OkReply closeFlow(const ipc::CloseFlowRequest& rq, Call& c);
    ipc::PagesReply release(const ipc::ReleaseRequest& rq, Call& c);
    std::optional<ipc::PagesReply> populate(const ipc::PopulateRequest& rq, Call& c);
    ipc::StatsReply stats(const ipc::StatsRequest& rq, Call& c);
    ipc::FlowStatsReply flowStats(const ipc::FlowStatsRequest& rq, Call& c);
    ipc::OkReply bye(const ipc::ByeRequest& rq, Call& c);
    // Delegated mode (session_delegated.cpp).
    ipc::DelegateReply delegate(const ipc::DelegateRequest& rq, Call& c);
    ipc::QueueReply queue(const ipc::QueueRequest& rq, Call& c);
    ipc::DelegateFlowReply delegateFlow(const ipc::DelegateFlowRequest& rq, Call& c);
    // hello: the interface this client runs itself ("" = brokered), if it
    // offered to; throws when it may use no interface at all.
    std::string chooseMode(bool offered);
    // Claims `spec` on `itf` for this connection and a flow of its lease,
    // and keeps what `open` opened; undoes the claims if `open` throws.
    OpenFlow& admitFlow(Iface& itf, const dataplane::FlowSpec& spec, const std::function<OpenFlow()>& open);
    FlowStats statsOf(const OpenFlow& f) const;
    // A region (brokered or delegated) of these sizes, checked and taken
    // from the rule's totals; throws ProtocolError (too_large, bad_message).
    RegionGeometry admitRegion(uint64_t size, uint32_t pageSize, uint64_t budget);
    // Gives a region admitRegion took back to the rule, unless kept.
    struct RegionGiveBack {
        Quotas::Lease& lease;
        bool keep = false;
        ~RegionGiveBack()
        {
            if (!keep)
                lease.giveRegion();
        }
    };

    Iface& flowIface(const std::string& name) const;
    dataplane::FlowSpec allowedFlow(uint16_t port, std::string addr) const;
    void checkRange(const char* what, uint64_t offset, uint64_t len) const;
    // release's pages: [offset, offset + len) minus buffers posted since
    // (`posted`); returns the pages released.
    uint64_t releaseLate(uint64_t offset, uint64_t len, std::span<const ipc::ReleaseRequest::Posted> posted);
    // This connection's open flow `id`; throws ProtocolError(NoFlow) for any other id.
    const OpenFlow& ownFlow(uint32_t id) const;
    void close(OpenFlow& f) noexcept;

    Daemon& d_;
    Fd fd_;
    const uint64_t id_;
    const ipc::PeerCred cred_;
    const std::string cgroup_;
    const uint64_t netns_;
    const std::shared_ptr<const ipc::PodInfo> pod_; // its flows use only the pod's addresses
    std::string name_;
    Quotas::Lease lease_;
    const ClientRule* const rule_; // lease_'s; nullptr: hello is refused
    const int64_t helloDeadline_;
    bool helloDone_ = false;
    std::optional<dataplane::ResidentMap> bitmap_;
    std::unique_ptr<Region> region_; // destroyed before the bitmap (it clears it)
    Iface* faultServer_ = nullptr;  // whose pagers serve region_'s faults
    Iface* delegated_ = nullptr;    // delegated mode: the interface whose data path it runs
    uint64_t delegatedSize_ = 0;    // delegated mode: its region's size (bitmap_ is its bitmap)
    std::vector<OpenFlow> flows_;
    std::optional<Populate> populate_;
    std::string ending_; // why the connection ends (serveOne)
};

} // namespace daemon
} // namespace npf
