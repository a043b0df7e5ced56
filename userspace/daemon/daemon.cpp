#include "daemon/daemon.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "daemon/delegation.h"
#include "daemon/health.h"
#include "daemon/memory_limit.h"
#include "daemon/metrics.h"
#include "daemon/pods.h"
#include "daemon/readiness.h"
#include "daemon/session.h"
#include "dataplane/stats.h"
#include "engine/service.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/netns.h"

namespace npf::daemon {
namespace {

using ipc::ErrorCode;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kAcceptPauseNs = 100 * kMs;
// How long a scrape waits for the control loop's lock (a round of requests
// holds it: milliseconds) before it goes out without npf's families.
constexpr std::chrono::milliseconds kSnapshotWait{1000};
// Descriptors npfd holds per connection (socket, region memfd, the
// client's uffd and its own, spill, resident bitmap map, headroom) and per
// flow (post ring map, completion memfd, notifier pipe).
constexpr uint64_t kFdsPerConnection = 8, kFdsPerFlow = 4, kFdsBase = 256;

// Raises the soft RLIMIT_NOFILE to what max_connections and the flows of
// every interface need (or to the hard limit, if that is lower: said so).
void ensureFdLimit(const DaemonConfig& c)
{
    const uint64_t need =
        kFdsBase + kFdsPerConnection * c.maxConnections + kFdsPerFlow * NPF_MAX_FLOWS * c.ifaces.size();
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= need)
        return;
    const rlim_t want = lim.rlim_max == RLIM_INFINITY ? need : std::min<rlim_t>(lim.rlim_max, need);
    if (want > lim.rlim_cur) {
        lim.rlim_cur = want;
        (void)::setrlimit(RLIMIT_NOFILE, &lim);
    }
    if (want < need)
        NPF_WARN("npfd: max_connections %u and %zu interface(s) need %llu descriptors, and the hard limit is %llu: "
                 "raise it (systemd: LimitNOFILE=; containers: ulimit nofile) or lower max_connections",
                 c.maxConnections, c.ifaces.size(), static_cast<unsigned long long>(need),
                 static_cast<unsigned long long>(lim.rlim_max));
}

// A rule whose connections are bounded by its share rather than by its own
// `connections` (a pod rule's, per pod, add up): said once, at start, so that
// a refusal surprises no operator.
void sayShares(const DaemonConfig& c)
{
    const uint32_t share = c.tenantShare();
    for (size_t i = 0; i < c.clients.size(); i++) {
        const ClientRule& r = c.clients[i];
        if (!r.pod && r.connections <= share)
            continue;
        const std::string own = r.pod ? std::to_string(r.connections) + " per pod"
                                      : std::to_string(r.connections);
        NPF_INFO("npfd: clients[%zu] may hold %u connections at once, all its clients together, not %s: "
                 "max_connections %u is shared by %zu rules and one share for root and clients no rule admits",
                 i, share, own.c_str(), c.maxConnections, c.clients.size());
    }
}

} // namespace

Daemon::Daemon(DaemonOptions opt) : opt_(std::move(opt)), quotas_(opt_.config.tenantShare())
{
    if (opt_.config.ifaces.empty())
        throwErrno(EINVAL, "npfd: no interface to serve (--iface, or \"ifaces\" in the config)");
    sayShares(opt_.config);
    ownNetns_ = ipc::currentNetns();
    ensureFdLimit(opt_.config);
    startHttp();
    openIfaces();
    listenClients();
    health_->setPhase(Health::Phase::Serving);
}

Daemon::~Daemon()
{
    stop_.store(true, std::memory_order_release);
    metrics_.reset(); // no scrape nor probe reads the services from now on
    healthServer_.reset();
    // Every client's flows withdrawn and removed (its traffic fails open to
    // the kernel), its region released; then the services stop.
    sessions_.clear();
    ifaces_.clear();
}

void Daemon::startHttp()
{
    for (const auto& [flag, address] : {std::pair{"--metrics", opt_.metrics}, std::pair{"--health", opt_.health}})
        if (!address.empty())
            checkListenAddress(flag, address); // before anything listens
    health_ = std::make_unique<Health>(
        opt_.stallLimit,
        Health::Source{[this] {
                           std::vector<LoopProgress> out;
                           for (const Iface& s : ifaces_)
                               if (s.service)
                                   s.service->loops(s.label + " ", out);
                           return out;
                       },
                       [this] { return notServed(ifaces_, listener_); },
                       [this] { return describeIfaces() + " on " + listener_.path(); }});
    if (!opt_.metrics.empty())
        metrics_ = std::make_unique<MetricsExporter>(opt_.metrics, [this] { return snapshot(); }, health_->routes());
    if (!opt_.health.empty()) {
        healthServer_ = serveHttp("--health", opt_.health, health_->routes());
        NPF_INFO("npfd: health probes on http://%s/healthz and /readyz", opt_.health.c_str());
    }
}

void Daemon::openIfaces()
{
    std::vector<IfaceSpec> specs;
    for (const std::string& label : opt_.config.ifaces) {
        std::string why;
        const std::optional<IfaceSpec> spec = parseIfaceSpec(label, &why);
        if (!spec)
            throw ArgumentError("npfd: interface " + why);
        specs.push_back(*spec);
    }
    const std::vector<IfaceMemory> plan = planMemory(opt_.config.ifaces, specs, opt_.engine);
    checkMemoryLimit(plan, cgroupMemoryLimit()); // before any pinning
    for (size_t i = 0; i < specs.size(); i++) {
        const IfaceSpec& spec = specs[i];
        const std::string& label = opt_.config.ifaces[i];
        EngineConfig c = opt_.engine;
        c.ifname = spec.ifname;
        // --queues is a bound (one DaemonSet, NICs of any queue count): the
        // queues the plan found, at most --queues.
        c.queues = plan[i].plan.queues;
        c.spillDir = opt_.config.spillDir;
        // The service is built in the interface's namespace (attach, pins,
        // sockets) and keeps it for its teardown.
        NetnsScope in(spec.netns);
        const uint64_t netns = ipc::currentNetns();
        for (const Iface& same : ifaces_)
            if (same.netns == netns && same.ifname == spec.ifname)
                throw ArgumentError("npfd: " + same.label + " and " + label + " are the same interface");
        Fd nsFd;
        if (netns != ownNetns_)
            nsFd.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
        if (netns != ownNetns_ && !nsFd)
            throwErrno("npfd: open the network namespace of " + label);
        if (opt_.config.delegated(label))
            ifaces_.push_back({label, spec.ifname, netns, nullptr, std::move(nsFd), std::make_unique<Delegation>(c)});
        else
            ifaces_.push_back({label, spec.ifname, netns, std::make_unique<Service>(c, &epochs_), std::move(nsFd)});
    }
    for (Iface& s : ifaces_)
        if (s.service)
            s.service->start();
}

void Daemon::listenClients()
{
    listener_ = ipc::listenSocket(opt_.config.socket, 0660, opt_.config.socketGroup);
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    stopFd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!epoll_ || !stopFd_)
        throwErrno("npfd: epoll/eventfd");
    for (int fd : {listener_.fd(), stopFd_.get()}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        checkErrno(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev), "npfd: epoll_ctl");
    }
    if (!opt_.config.podsSocket.empty())
        pods_ = std::make_unique<PodRegistry>(opt_.config.podsSocket, epoll_.get(), ownNetns_,
                                              [this](const std::string& container) { dropPod(container); });
}

Iface* Daemon::iface(const std::string& ifname, uint64_t netns) noexcept
{
    for (uint64_t ns : {netns, ownNetns_})
        for (Iface& s : ifaces_)
            if (s.netns == ns && s.ifname == ifname)
                return &s;
    return nullptr;
}

Iface* Daemon::faultServer(uint64_t netns) noexcept
{
    for (uint64_t ns : {netns, ownNetns_})
        for (Iface& s : ifaces_)
            if (s.netns == ns && s.service)
                return &s;
    for (Iface& s : ifaces_)
        if (s.service)
            return &s;
    return nullptr;
}

int Iface::ifindex() const noexcept { return service ? service->ifindex() : delegation->dp().ifindex(); }
uint32_t Iface::progId() const noexcept { return service ? service->progId() : delegation->dp().progId(); }

std::vector<std::string> Daemon::ifacesIn(uint64_t netns) const
{
    std::vector<std::string> out;
    for (uint64_t ns : {netns, ownNetns_})
        for (const Iface& s : ifaces_)
            if (s.netns == ns && std::find(out.begin(), out.end(), s.ifname) == out.end())
                out.push_back(s.ifname);
    return out;
}

std::string Daemon::describeIfaces() const
{
    std::string out;
    for (const Iface& s : ifaces_)
        out += (out.empty() ? "" : ", ") + s.label;
    return out;
}

Snapshot Daemon::snapshot()
{
    std::unique_lock<std::timed_mutex> lock(controlMu_, kSnapshotWait);
    if (!lock)
        throw std::runtime_error("the control loop has held its lock for over " +
                                 std::to_string(kSnapshotWait.count()) + " ms (busy, or stuck: /healthz says)");
    Snapshot out;
    for (const Iface& s : ifaces_)
        if (s.service)
            out.ifaces.push_back({s.label, s.service->stats(), s.service->regionStats(), s.service->xdpCounters()});
        else // the data path's numbers are its client's; XDP's are here
            out.ifaces.push_back({s.label, EngineStats{}, RegionStats{}, dataplane::readXdpStats(s.delegation->dp())});
    for (const auto& [fd, session] : sessions_)
        session->clientFlows(out.flows);
    out.clients = sessions_.size();
    out.pods = pods_ ? pods_->pods() : 0;
    return out;
}

void Daemon::stop() noexcept
{
    stop_.store(true, std::memory_order_release);
    health_->setPhase(Health::Phase::Stopping);
    const uint64_t one = 1;
    (void)!::write(stopFd_.get(), &one, sizeof(one));
}

std::string Daemon::run()
{
    epoll_event evs[32];
    int timeoutMs = 500;
    bool progressed = false;
    while (!stop_.load(std::memory_order_acquire)) {
        health_->beat();
        // Populates in progress go on between requests: at once while they
        // install, each ms while they wait for the pagers.
        const int wait = working_.empty() ? timeoutMs : progressed ? 0 : 1;
        const int n = ::epoll_wait(epoll_.get(), evs, 32, wait);
        if (n < 0 && errno != EINTR)
            throwErrno("npfd: epoll_wait");
        std::lock_guard<std::timed_mutex> lock(controlMu_);
        for (int i = 0; i < std::max(n, 0); i++) {
            const int fd = evs[i].data.fd;
            if (fd == stopFd_.get())
                return "";
            if (fd == listener_.fd())
                accept(fd, nullptr);
            else if (pods_ && pods_->handle(fd))
                continue;
            else if (auto pod = pods_ ? pods_->podOf(fd) : nullptr)
                accept(fd, pod);
            else
                handleRequests(fd);
        }
        progressed = workSlices();
        timeoutMs = closeSilent(500);
        if (acceptPausedUntilNs_) {
            const int64_t left = acceptPausedUntilNs_ - monotonicNs();
            if (left <= 0)
                resumeAccept();
            else
                timeoutMs = std::min<int>(timeoutMs, static_cast<int>(left / kMs) + 1);
        }
        for (Iface& s : ifaces_)
            if (std::string why = s.service ? s.service->failure() : ""; !why.empty()) {
                NPF_ERR("npfd: %s: stopping", why.c_str());
                return why;
            }
    }
    return "";
}

void Daemon::accept(int listenFd, const std::shared_ptr<const ipc::PodInfo>& pod)
{
    for (;;) {
        Fd fd;
        try {
            fd = ipc::acceptOn(listenFd, pod ? pod->describe() + "'s " + ipc::kPodSocket : listener_.path());
        } catch (const std::exception& e) { // EMFILE, ENFILE, ENOBUFS: the clients wait in the backlog
            NPF_WARN_RL("npfd: %s: new clients wait until a connection closes (%zu open; npfd's descriptor limit, "
                        "LimitNOFILE, may be too low for max_connections %u)",
                        e.what(), sessions_.size(), opt_.config.maxConnections);
            pauseAccept();
            return;
        }
        if (!fd)
            return;
        if (sessions_.size() >= opt_.config.maxConnections) {
            NPF_WARN_RL("npfd: a client was refused: all max_connections (%u) are open", opt_.config.maxConnections);
            ipc::lastWord(fd.get(), ErrorCode::NoSpace, EMFILE,
                     "npfd has all its max_connections (" + std::to_string(opt_.config.maxConnections) +
                         ") open: try again later");
            continue;
        }
        Peer peer;
        try {
            peer = Peer::of(fd.get());
        } catch (const std::exception& e) {
            NPF_WARN_RL("npfd: a client connected and left at once: %s", e.what());
            continue;
        }
        peer.pod = pod;
        const PodName name = pod ? PodName{pod->ns, pod->name} : PodName{};
        const ClientRule* rule = opt_.config.match(peer.cred.uid, peer.cred.gid, peer.cgroup, pod ? &name : nullptr);
        std::string why;
        std::optional<Quotas::Lease> lease = quotas_.admit(rule, &why, pod ? pod->container : "");
        if (!lease) {
            NPF_WARN_RL("npfd: pid %d uid %u%s refused: %s", peer.cred.pid, peer.cred.uid,
                        pod ? (" of " + pod->describe()).c_str() : "", why.c_str());
            ipc::lastWord(fd.get(), rule ? ErrorCode::NoSpace : ErrorCode::NotAllowed, rule ? EUSERS : EACCES, why);
            continue;
        }
        const int raw = fd.get();
        const int64_t deadline = monotonicNs() + int64_t{opt_.config.helloTimeoutMs} * kMs;
        auto s = std::make_unique<Session>(*this, std::move(fd), nextSession_++, std::move(peer), std::move(*lease),
                                           deadline);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = raw;
        if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw, &ev) != 0) {
            NPF_WARN("npfd: epoll_ctl: %s", std::strerror(errno));
            continue;
        }
        sessions_.emplace(raw, std::move(s));
    }
}

void Daemon::handleRequests(int fd) noexcept
{
    auto it = sessions_.find(fd);
    if (it == sessions_.end())
        return;
    Session& s = *it->second;
    // One request, then the other clients' turn: epoll reports this socket
    // again while it has more, after the others that are ready. A client
    // whose populate is in progress waits for it (workSlices()).
    if (s.working())
        return;
    const Session::Step step = s.serveOne();
    if (step == Session::Step::Idle)
        return;
    if (step != Session::Step::Gone)
        health_->beat();
    if (step != Session::Step::Served) {
        drop(fd, s.ending().c_str());
        return;
    }
    if (s.working()) {
        setEvents(fd, 0); // its next requests wait in its socket
        working_.push_back(fd);
    }
}

bool Daemon::workSlices() noexcept
{
    bool progressed = false;
    const std::vector<int> fds = working_;
    for (int fd : fds) {
        auto it = sessions_.find(fd);
        if (it == sessions_.end())
            continue;
        bool keep = true;
        const Session::Work w = it->second->work(&keep);
        progressed |= w != Session::Work::Waiting;
        if (w != Session::Work::Done)
            continue;
        std::erase(working_, fd);
        health_->beat();
        if (!keep)
            drop(fd, "disconnected");
        else
            setEvents(fd, EPOLLIN);
    }
    return progressed;
}

void Daemon::setEvents(int fd, uint32_t events) noexcept
{
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void Daemon::drop(int fd, const char* why) noexcept
{
    auto it = sessions_.find(fd);
    if (it == sessions_.end())
        return;
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
    std::erase(working_, fd);
    const std::string who = it->second->describe();
    sessions_.erase(it); // its flows closed, its region released
    NPF_INFO("%s %s: its flows are closed", who.c_str(), why);
    if (acceptPausedUntilNs_)
        resumeAccept(); // a connection's descriptors are free again
}

void Daemon::dropPod(const std::string& container) noexcept
{
    std::vector<int> gone;
    for (const auto& [fd, s] : sessions_)
        if (s->pod() && s->pod()->container == container)
            gone.push_back(fd);
    for (int fd : gone) {
        ipc::lastWord(fd, ErrorCode::NotAllowed, ENOENT, "this client's pod was deleted");
        drop(fd, "lost its pod");
    }
}

int Daemon::closeSilent(int cap) noexcept
{
    const int64_t now = monotonicNs();
    int64_t next = now + int64_t{cap} * kMs;
    std::vector<int> late;
    for (const auto& [fd, s] : sessions_)
        if (!s->helloDone()) {
            if (s->helloDeadline() <= now)
                late.push_back(fd);
            else
                next = std::min(next, s->helloDeadline());
        }
    for (int fd : late) {
        handleRequests(fd); // a hello that waits to be read (this round had more events than it took) counts
        auto it = sessions_.find(fd);
        if (it == sessions_.end() || it->second->helloDone())
            continue;
        ipc::lastWord(fd, ErrorCode::BadMessage, ETIMEDOUT,
                 "no hello within " + std::to_string(opt_.config.helloTimeoutMs) + " ms (hello_timeout_ms): closed");
        drop(fd, "said no hello in time");
    }
    return static_cast<int>((next - now + kMs - 1) / kMs);
}

void Daemon::pauseAccept() noexcept
{
    listenForClients(0);
    acceptPausedUntilNs_ = monotonicNs() + kAcceptPauseNs;
}

void Daemon::resumeAccept() noexcept
{
    listenForClients(EPOLLIN);
    acceptPausedUntilNs_ = 0;
}

void Daemon::listenForClients(uint32_t events) noexcept
{
    auto set = [&](int fd) { setEvents(fd, events); };
    set(listener_.fd());
    if (pods_)
        pods_->forEachListener(set);
}

} // namespace npf::daemon
