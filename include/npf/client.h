// libnpf, sidecar mode: receive through npfd (the npf daemon) instead of an
// in-process engine, in one of two modes (ClientMode). Brokered: npfd runs
// the data path; the application owns its region -- a memfd it maps,
// registered with its own userfaultfd, both handed to npfd. Delegated
// (npfd's config delegates the interface to its one client): npfd hands
// over the interface's sockets and libnpf runs an npf::Engine in this
// process, on private memory. Either way the application gets the same
// npf::Flow as with npf::Engine; only the construction differs:
//
//   npf::Client cli({.regionSize = 64ull << 20, .residentBudget = 8ull << 20});   // within npfd's rule
//   npf::Flow& f = cli.openFlow(9000);
//   f.post(0, 2048);                       // [offset, offset + len) of cli.region()
//   npf_completion c[64];
//   int n = f.wait(c, std::chrono::milliseconds(100));    // < 0: -EPIPE once npfd is gone
//
// The process needs no privileges: npfd authenticates it by its uid/gid
// (SO_PEERCRED) against its config. If npfd goes away, Flow::wait returns -EPIPE
// at once and Flow::failure() / Client::failure() say so; the region and
// what was received into it stay: what npfd had evicted is saved in a spill
// file this process owns, and is copied back into the region as soon as the
// loss is noticed (a page touched before that reads zeros: npfd no longer
// serves its faults). reconnect() registers the same region with a
// (restarted) npfd; flows are then opened again.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "npf/engine.h"

namespace npf {

// Who runs the data path (docs/architecture.md, "Delegated mode").
enum class ClientMode {
    // Delegated where npfd delegates the interface (its config's
    // "delegate"), else brokered.
    Auto,
    // npfd hands this process the interface's data path -- its AF_XDP
    // sockets, the resident bitmap, each flow's post ring -- and libnpf runs
    // an npf::Engine here: the region is this process's private memory, its
    // faults are served by its own (user-mode) userfaultfd. One client per
    // interface; refused where npfd does not delegate.
    Delegated,
    // npfd runs the data path: the region is a memfd npfd maps too.
    Brokered,
};
const char* toString(ClientMode m) noexcept; // "auto", "delegated", "brokered"

struct ClientConfig {
    std::string socket = "/run/npf/npfd.sock";
    ClientMode mode = ClientMode::Auto;
    uint64_t regionSize = 1ull << 30;   // bytes of virtual receive memory (multiple of pageSize)
    // 4096, or 2 MiB: a hugetlbfs region (its pages from the kernel's huge
    // page pool, /proc/sys/vm/nr_hugepages; npfd refuses the region with
    // no_space when the pool cannot hold its budget). With 2 MiB pages a
    // thread of this process (npf-install) allocates them from images npfd
    // writes to an 8 MiB install area: this process's hugetlb cgroup (its
    // pod's hugepages-2Mi) pays for its resident pages.
    uint64_t pageSize = 4096;
    // Bytes of the region npfd keeps resident; 0 = npfd's default for the
    // client's rule: its fair share, the rule's resident_bytes divided by
    // its connections (or what the rule's other connections leave free, if
    // less; root's rule: what is free), up to regionSize, so that every
    // connection the rule admits gets in with the default. Ask for more to
    // get more, up to what the rule has free (the hello reply says it).
    uint64_t residentBudget = 0;
    std::string name;                   // shown in npfd's log
    std::chrono::milliseconds timeout{10000}; // for each request to npfd
    // Delegated mode: the tuning of the engine this process runs (reserve,
    // regionMemory, prefetchDepth, pagerThreads, CPUs, runToCompletion,
    // spillDir, statsPath; "-" by default: no snapshot file). The interface,
    // its queues and their sockets, the region's size, page size and
    // budget come from npfd and the fields above.
    EngineConfig engine = [] {
        EngineConfig c;
        c.statsPath = "-";
        return c;
    }();
};

// Privileges: none. The process needs userfaultfd in user mode only
// (UFFD_USER_MODE_ONLY: allowed without privilege whatever
// vm.unprivileged_userfaultfd says; a seccomp profile must allow the
// userfaultfd system call) and a uid/gid npfd's config admits.
//
// Threads: the Client's methods may be called from any thread, concurrently
// with each other (requests to npfd go one at a time) and with its flows'
// owners, except the destructor, reconnect() and closeFlow(f) (no thread may
// use f, or any flow for reconnect(), or be inside one of its calls then).
// The Flows follow npf/engine.h's rules; their wait()/poll()/arm() return
// -EPIPE once npfd is gone.
class Client {
public:
    // Connects, says hello and registers the region. Throws std::system_error
    // naming what failed, with npfd's reason for a refusal.
    explicit Client(const ClientConfig& cfg);
    ~Client(); // says bye: npfd closes the flows (their traffic passes to the kernel)
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Opens the flow for UDP destination port `port` (optionally only for
    // `addr`) on `iface` ("" = npfd's only interface). Refused when another
    // client holds it or npfd's config does not allow it.
    Flow& openFlow(uint16_t port, const std::string& addr = "", const std::string& iface = "");
    // The same with credits (npf::CreditConfig): in delegated mode this
    // process sends them, in brokered mode npfd does.
    Flow& openFlow(uint16_t port, const FlowOptions& opts, const std::string& iface = "");
    // Asks npfd to stop serving `f` (its traffic passes to the kernel) and
    // destroys it. A flow of a connection that is gone (npfd restarted) is
    // only destroyed. Throws std::system_error(EINVAL) if `f` is not this
    // client's, or another std::system_error if npfd refuses.
    void closeFlow(Flow& f);

    // Delegated or Brokered: what npfd granted.
    ClientMode mode() const noexcept;
    // Delegated mode: the interface whose data path this process runs ("" brokered).
    const std::string& delegatedIface() const noexcept;

    uint8_t* region() const noexcept;
    uint64_t regionSize() const noexcept;
    uint64_t residentBudget() const noexcept; // what npfd granted
    // Where the region's pages come from, named as Engine::statsJson()'s
    // "route" names an engine's: "client-memfd-4k" or "client-hugetlbfs-2m"
    // (this client's memory, installed by npfd through its userfaultfd or
    // by this client's own thread).
    const char* route() const noexcept;
    // Returns at once (npfd applies it in order with this client's requests);
    // throws std::system_error(EINVAL) for a range outside the region.
    // Adjoining releases are held back and sent as one request (each costs
    // npfd's control thread a message): when they reach a 16th of the
    // resident budget (at most 1 MiB), when a release does not adjoin them,
    // before any other request, and when a flow's wait() times out with
    // nothing. A loop that stops releasing (idle, polling or on epoll) leaves
    // at most that much unreleased until its next call: those pages are
    // saved, not discarded, if npfd evicts them meanwhile.
    void release(uint64_t offset, uint64_t len);
    uint64_t populate(uint64_t offset, uint64_t len);
    // This client's numbers (its flows' completions, its region's faults);
    // the shared dataplane's counters are the operator's (npfctl stats).
    EngineStats stats() const;
    // The same as Engine::statsJson() shapes it (counters, latencies, the
    // region's counters and "route"): delegated mode, its engine's; brokered
    // mode, this client's numbers (stats()) and route().
    std::string statsJson() const;
    // Why the client is no longer served, "" while it is.
    std::string failure() const;
    // After npfd restarted: connects again and registers the same region
    // (what it holds stays). The old flows are dead; open them again.
    // Delegated mode: throws std::system_error(EOPNOTSUPP) (the region is
    // the engine's: make a new Client).
    void reconnect();
    // Pages npfd had evicted that came back from this client's spill file
    // when the connection was lost (failure() noticed it, or reconnect()).
    uint64_t restoredPages() const noexcept;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace npf
