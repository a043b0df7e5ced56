// npfd: npf as a service for other processes. One Service per interface
// (the XDP program, AF_XDP sockets, workers, pager), a Unix socket
// (SOCK_SEQPACKET, docs/protocol.md) and one Session per connected client:
// the client's own region (its memfd and userfaultfd, adopted), its flows.
//
// Threads: the control thread runs run(): accept, requests, disconnects, all
// of them one at a time (opening a flow waits for RCU grace periods: a few
// ms), one request of each client in turn; a populate goes on in slices
// between them, so no client's requests hold another's for long. The services' workers and pagers run the dataplane. --metrics and
// --health each serve HTTP on a thread of their own (metrics_server.h),
// started first, so the probes (health.h) answer while npfd starts.
//
// Every client is a potential attacker of every other (docs/protocol.md,
// "Threat model"): connections are bounded npfd-wide (max_connections) and
// per rule (Quotas), a connection that does not say hello in time is closed,
// and accept() backs off when npfd runs out of descriptors instead of
// spinning on EMFILE.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/delegation.h"
#include "daemon/flow_claims.h"
#include "daemon/quota.h"
#include "ipc/pods.h"
#include "ipc/unix_socket.h"
#include "npf/engine.h"
#include "region/epoch.h"
#include "sys/fd.h"

namespace npf {

class Service;

namespace daemon {

class Session;
class Health;
class PodRegistry;
class MetricsExporter;
class MetricsServer;
struct Snapshot;

struct DaemonOptions {
    DaemonConfig config;
    EngineConfig engine;         // template for every interface's service (ifname, region fields ignored)
    std::string metrics;         // ADDR:PORT of the Prometheus exporter (metrics.h) and the probes; empty = none
    std::string health;          // ADDR:PORT of the probes alone (health.h); empty = none
    std::chrono::milliseconds stallLimit{10000}; // /healthz fails when a loop makes no progress for longer
};

// One interface npfd serves: as configured ("eth0", "pod-a:eth0"), its name
// and network namespace, and either its service (brokered: npfd runs the
// data path for all its clients) or its delegation (one client runs it).
struct Iface {
    std::string label;   // as configured: the metrics' iface label, the log's
    std::string ifname;  // in its namespace
    uint64_t netns = 0;  // that namespace's cookie (ipc::currentNetns)
    std::unique_ptr<Service> service;       // brokered
    Fd netnsFd;          // that namespace, when it is not npfd's (the probes enter it)
    std::unique_ptr<Delegation> delegation; // delegated
    int ifindex() const noexcept;
    uint32_t progId() const noexcept;
};

class Daemon {
public:
    // Opens every interface's service and the socket; throws naming what failed.
    explicit Daemon(DaemonOptions opt);
    ~Daemon(); // disconnects every client (their flows withdrawn and removed), stops the services
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Serves until stop() (any thread, or a signal handler: it writes an
    // eventfd): returns "". Or until an interface can no longer be served
    // (deleted, moved out of its namespace): returns why.
    std::string run();
    void stop() noexcept;

    // For sessions.
    const DaemonConfig& config() const noexcept { return opt_.config; }
    // The interface a client in the network namespace `netns` (cookie) means
    // by `ifname`: npfd's `ifname` in that namespace (a pod's eth0), else
    // npfd's `ifname` in npfd's own namespace (the node's NIC, which carries
    // every pod's traffic: the client rules bound what a client may take).
    // nullptr if neither: a client never reaches another pod's interface.
    Iface* iface(const std::string& ifname, uint64_t netns) noexcept;
    std::vector<std::string> ifacesIn(uint64_t netns) const; // the names a client there may use
    std::string describeIfaces() const;                       // "eth0, pod-a:eth0"
    // The interface whose pagers serve the faults (CPU faults, prefetch,
    // protection) of a region of a client in `netns`: the first brokered one
    // npfd serves in that namespace (the pod's), else the first in npfd's
    // own (the node's NIC), else the first; nullptr if every one is
    // delegated. Datagrams reach the region from any interface's pagers.
    Iface* faultServer(uint64_t netns) noexcept;
    EpochDomain& epochs() noexcept { return epochs_; }
    FlowClaims& flowClaims() noexcept { return claims_; }
    bool stopping() const noexcept { return stop_.load(std::memory_order_acquire); }
    // Every service's counters and every client's flows, between two
    // requests (the exporter's thread).
    Snapshot snapshot();

private:
    void startHttp();   // the probes and the exporter, before anything else
    void openIfaces();  // a Service per interface, started
    void listenClients();
    // Accepts the pending connections on `fd`: npfd's socket (pod nullptr)
    // or a pod's listener (its clients are that pod's).
    void accept(int fd, const std::shared_ptr<const ipc::PodInfo>& pod);
    void dropPod(const std::string& container) noexcept; // its clients, on pod_del
    // One request of the client on `fd` (the others' turn next).
    void handleRequests(int fd) noexcept;
    // A slice of each populate in progress; true if any made progress.
    bool workSlices() noexcept;
    void setEvents(int fd, uint32_t events) noexcept; // EPOLL_CTL_MOD
    void drop(int fd, const char* why) noexcept;
    // Closes the connections that did not say hello in time; returns the
    // milliseconds until the next such deadline (at most `cap`).
    int closeSilent(int cap) noexcept;
    // EMFILE and friends: the listener leaves the epoll set for a while (the
    // clients wait in the backlog), instead of waking run() for nothing.
    void pauseAccept() noexcept;
    void resumeAccept() noexcept;
    void listenForClients(uint32_t events) noexcept; // npfd's socket and every pod's listener

    DaemonOptions opt_;
    EpochDomain epochs_; // shared by the services: a client's region may receive on several
    uint64_t ownNetns_ = 0; // npfd's network namespace (cookie)
    std::vector<Iface> ifaces_;
    ipc::Listener listener_;
    Fd epoll_, stopFd_;
    std::unique_ptr<PodRegistry> pods_; // the pods socket and pods' listeners; none without pods_socket
    std::atomic<bool> stop_{false};
    Quotas quotas_;
    std::map<int, std::unique_ptr<Session>> sessions_; // by connection fd
    std::vector<int> working_;                          // of those, the ones whose populate is in progress
    int64_t acceptPausedUntilNs_ = 0;                  // 0: accepting
    FlowClaims claims_;
    uint64_t nextSession_ = 1;
    // Held by run() while it handles requests and disconnects, by snapshot()
    // while it reads: flows open and close (and their completions join the
    // service's totals) only in between, so a scrape never sees a flow that
    // is being freed, nor one whose counts are in neither place. Timed: a
    // scrape waits for a stuck control loop only so long.
    std::timed_mutex controlMu_;
    std::unique_ptr<Health> health_;           // before the servers that call it
    std::unique_ptr<MetricsExporter> metrics_;
    std::unique_ptr<MetricsServer> healthServer_;
};

} // namespace daemon
} // namespace npf
