// One connected npfd client: its credentials and rule, its region (its
// memfd + userfaultfd, adopted by a Region, and the resident bitmap XDP
// reads), its flows. Requests are handled one at a time on the daemon's
// control thread; every one gets exactly one reply.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/flow_ring.h"
#include "dataplane/flows.h"
#include "daemon/quota.h"
#include "ipc/pods.h"
#include "ipc/protocol.h"
#include "ipc/unix_socket.h"
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
    // Handles one message; false when the connection must end (EOF, a
    // protocol violation, bye). Never throws.
    bool handle(ipc::WireMessage msg) noexcept;
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
        ServedFlow* flow;
        dataplane::FlowSpec spec; // as claimed in the daemon's FlowClaims
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

    // The reply, or "" for a populate (work() replies when it ends).
    std::string reply(const ipc::Message& m, std::vector<Fd>& fds, std::vector<int>& outFds);
    bool send(const std::string& out, const std::vector<int>& fds) noexcept; // false: the client is not taking it
    std::string hello(const ipc::Message& m);
    std::string region(const ipc::Message& m, std::vector<Fd>& fds);
    std::string openFlow(const ipc::Message& m, std::vector<int>& outFds);
    std::string closeFlow(const ipc::Message& m);
    // release's pages: [offset, offset + len) minus buffers posted since
    // (`posted`); returns the pages released.
    uint64_t releaseLate(const ipc::Message& m, uint64_t offset, uint64_t len,
                         std::span<const ipc::ReleaseRequest::Posted> posted);
    std::string pages(const ipc::Message& m, bool release);
    std::string stats(const ipc::Message& m);
    std::string flowStats(const ipc::Message& m);
    // This connection's open flow `id`; throws ProtocolError(NoFlow) for any other id.
    const OpenFlow& ownFlow(uint32_t id, uint32_t requestId) const;
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
    std::vector<OpenFlow> flows_;
    std::optional<Populate> populate_;
};

} // namespace daemon
} // namespace npf
