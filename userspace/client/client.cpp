// npf::Client: the application side of npfd (include/npf/client.h).
#include "npf/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "client/delegated_xdp.h"
#include "client/install_thread.h"
#include "counters/engine_stats.h"
#include "counters/flow_stats.h"
#include "dataplane/flow_ring.h"
#include "engine/engine_impl.h"
#include "engine/flow_impl.h"
#include "ipc/channel.h"
#include "region/routes.h"
#include "order/completion_ring.h"
#include "region/geometry.h"
#include "region/uffd.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"

namespace npf {
namespace {

constexpr unsigned kMfdHuge2M = 21u << 26; // MFD_HUGE_2MB (MFD_HUGE_SHIFT 26), missing from Debian 12's glibc
// Page images the install area of a 2 MiB region holds: npfd posts runs of
// up to this many pages to the installer (8 MiB, allocated by this process).
constexpr uint32_t kInstallImages = 4;
// release() holds adjoining ranges back and sends them as one request of at
// most this many bytes, or a 16th of the resident budget if that is less.
constexpr uint64_t kReleaseBatchMax = 1 << 20;

// A userfaultfd this (unprivileged) process may have: user-mode faults only
// (a syscall that touches a missing page gets EFAULT: touch it first), with
// the mapping registered for MISSING, and WP where shmem supports it (npfd
// then fences the client's writes while it evicts).
Userfaultfd registerUffd(void* base, uint64_t size, bool huge)
{
    const uint64_t missing = huge ? UFFD_FEATURE_MISSING_HUGETLBFS : UFFD_FEATURE_MISSING_SHMEM;
    const std::string who = "the npf region";
    Userfaultfd uffd = Userfaultfd::open(missing, UFFD_FEATURE_WP_HUGETLBFS_SHMEM, who, UFFD_USER_MODE_ONLY);
    if (uffd.features() & UFFD_FEATURE_WP_HUGETLBFS_SHMEM) {
        try {
            uffd.registerRange(base, size, UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP, who);
            return uffd;
        } catch (const std::system_error&) {
            // No WP for this mapping: MISSING alone, on a uffd without WP.
            uffd = Userfaultfd::open(missing, 0, who, UFFD_USER_MODE_ONLY);
        }
    }
    uffd.registerRange(base, size, UFFDIO_REGISTER_MODE_MISSING, who);
    return uffd;
}

} // namespace

// One connection's fate, shared with its flows. When it is lost (npfd
// exited, restarted, or dropped the client: in every case npfd no longer
// uses the region), the content npfd had evicted is brought back from the
// client's spill file into the memfd, once, as soon as anyone notices.
struct Link {
    Link(int memfd, int spill, uint64_t size, uint64_t pageSize)
        : memfd(memfd), spill(spill), size(size), pageSize(pageSize)
    {
    }
    std::atomic<int> gone{0};
    std::once_flag recovered;
    const int memfd, spill; // the Client's, which outlives its flows
    const uint64_t size, pageSize;
    std::atomic<uint64_t> restoredPages{0};

    // Gone once the content is back (a second caller waits for the first):
    // whoever sees isGone() sees restoredPages final.
    void lost() noexcept
    {
        std::call_once(recovered, [this] { restoredPages.store(restore(), std::memory_order_release); });
        gone.store(1, std::memory_order_release);
    }
    bool isGone() const noexcept { return gone.load(std::memory_order_acquire) != 0; }
    // Every page the spill holds and the memfd does not (a hole): copied in.
    //
    // 2 MiB pages: hugetlbfs has no write(2) and no SEEK_DATA. Content goes
    // in through a second mapping of the memfd (never registered with a
    // userfaultfd), and every page the spill holds is taken as evicted (npfd
    // drops a page's spill content as soon as it restores it).
    uint64_t restore() noexcept
    {
        if (memfd < 0) // delegated mode: the region is the engine's, nothing of it was npfd's
            return 0;
        const bool huge = pageSize != NPF_PAGE_SIZE;
        void* alias = nullptr;
        if (huge && (alias = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0)) ==
                        MAP_FAILED)
            return 0;
        std::vector<uint8_t> buf(huge ? 0 : pageSize);
        const auto whole = static_cast<ssize_t>(pageSize);
        auto copy = [&](off_t p) {
            if (huge)
                return ::pread(spill, static_cast<uint8_t*>(alias) + p, pageSize, p) == whole;
            if (::lseek(memfd, p, SEEK_DATA) == p)
                return false; // the memfd has it: npfd had restored it
            return ::pread(spill, buf.data(), pageSize, p) == whole && ::pwrite(memfd, buf.data(), pageSize, p) == whole;
        };
        uint64_t n = 0;
        const off_t mask = static_cast<off_t>(pageSize - 1);
        for (off_t off = 0;;) {
            const off_t data = ::lseek(spill, off, SEEK_DATA);
            if (data < 0)
                break; // ENXIO: no more data
            const off_t hole = ::lseek(spill, data, SEEK_HOLE);
            if (hole <= data)
                break;
            for (off_t p = data & ~mask; p < hole && static_cast<uint64_t>(p) < size; p += whole)
                n += copy(p);
            (void)::fallocate(spill, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, data, hole - data);
            off = (hole + mask) & ~mask;
        }
        if (alias)
            ::munmap(alias, size);
        return n;
    }
    // npfd closed the connection: POLLHUP on the socket.
    bool hungUp(int sock) noexcept
    {
        pollfd p{sock, 0, 0};
        if (!isGone() && ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)))
            lost();
        return isGone();
    }
};

struct Client::Impl {
    ClientConfig cfg;
    RegionGeometry geo;
    Fd memfd, spill;
    MmapArea map;
    uint64_t budget = 0;
    // Delegated mode: the engine this process runs on npfd's sockets.
    std::unique_ptr<Engine> engine;
    std::string delegated; // its interface
    std::optional<ipc::Channel> ch;
    std::mutex mu; // the channel: one request at a time
    // Each open flow and the connection it was opened on.
    struct OpenFlow {
        std::unique_ptr<Flow> app;
        std::shared_ptr<Link> on;
    };
    std::mutex flowsMu; // openFlow and closeFlow may run on any thread
    std::vector<OpenFlow> flows;
    std::shared_ptr<Link> link;
    // 2 MiB pages: the thread that allocates them (npfd posts the images),
    // so that this process pays; one per connection.
    std::unique_ptr<InstallThread> installer;
    // release(): a request (a message, and a reply to skip) each, read by
    // npfd's control thread, the one thread all its clients share. So
    // adjoining ranges are held back and sent as one: when they reach
    // releaseBatch bytes, when a release does not adjoin them, before any
    // other request, and when a flow's wait() times out with nothing (it is
    // idle; a wait that sleeps between batches does not send them: that was
    // a request per batch again).
    std::optional<ipc::ReleaseRequest> pendingRelease; // under mu
    std::atomic<bool> releasePending{false};
    uint64_t releaseBatch = 0;

    void connect();
    void makeSharedRegion(); // brokered, once: the memfd, its mapping, the spill file
    void registerRegion(const ipc::HelloReply& h);
    void startDelegated(const ipc::HelloReply& h);
    uint64_t grantedBudget(const ipc::HelloReply& h) const;
    NpfdCalls npfdCalls();
    template <typename Req>
    auto call(const Req& rq, std::span<const int> fds = {})
    {
        std::lock_guard<std::mutex> lock(mu);
        return callLocked(rq, fds);
    }
    template <typename Req>
    auto callLocked(const Req& rq, std::span<const int> fds = {})
    {
        try {
            sendReleaseLocked(); // in order with this request
            return ch->call(rq, fds, cfg.timeout);
        } catch (const std::system_error& e) {
            noteLoss(e);
            throw;
        }
    }
    // A send or call that failed because npfd closed the connection: the
    // connection is lost (its flows' wait() then says -EPIPE).
    void noteLoss(const std::system_error& e) noexcept
    {
        if (e.code().value() == ECONNRESET || e.code().value() == EPIPE)
            link->lost();
    }
    // Sends the held-back release, if any (mu held).
    void sendReleaseLocked()
    {
        if (!pendingRelease)
            return;
        const ipc::ReleaseRequest rq = std::move(*pendingRelease);
        pendingRelease.reset();
        releasePending.store(false, std::memory_order_relaxed);
        ch->send(rq);
    }
    // A flow is idle: sends the held-back release unless a request
    // is in flight (it sent it) or the connection is gone (a hint is moot).
    void flushRelease() noexcept;
    // Flow::stats of flow `id`, opened on the connection `on`: one flow_stats
    // request. Throws std::system_error naming the flow.
    FlowStats flowStats(uint32_t id, uint16_t port, const std::shared_ptr<Link>& on);
};

FlowStats Client::Impl::flowStats(uint32_t id, uint16_t port, const std::shared_ptr<Link>& on)
{
    const std::string what = "npf flow " + std::to_string(id) + " (port " + std::to_string(port) + "): stats from npfd";
    std::lock_guard<std::mutex> lock(mu);
    // After reconnect() the id may name another flow on the new connection:
    // a flow of a lost connection has no numbers to ask for.
    if (on != link || on->isGone() || on->hungUp(ch->fd()))
        throwErrno(ENOTCONN, what + ": npfd closed the connection the flow was opened on (it exited or "
                                    "restarted): reconnect and open the flow again");
    ipc::FlowStatsReply r;
    try {
        r = callLocked(ipc::FlowStatsRequest{id}).reply;
    } catch (const ipc::RemoteError& e) {
        throwErrno(e.err() ? e.err() : EIO, what + ": " + e.what());
    } catch (const ipc::ProtocolError& e) {
        throwErrno(EPROTO, what + ": a bad reply: " + e.what());
    } catch (const std::system_error& e) {
        // what() ends in ": <the code's message>", which the new one adds again.
        std::string why = e.what();
        if (const std::string tail = ": " + e.code().message(); why.ends_with(tail))
            why.resize(why.size() - tail.size());
        throw std::system_error(e.code(), what + ": " + why);
    }
    try {
        return counters::parseFlowStats(r.stats);
    } catch (const std::invalid_argument& e) {
        throwErrno(EPROTO, what + ": a bad reply: " + e.what());
    }
}

void Client::Impl::flushRelease() noexcept
{
    if (!releasePending.load(std::memory_order_acquire))
        return;
    std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
    if (!lock || link->isGone())
        return;
    try {
        sendReleaseLocked();
    } catch (const std::system_error& e) {
        noteLoss(e);
    } catch (const std::exception&) {
        // A hint: the next release or request tries again with what comes then.
    }
}

// Asked none: npfd's default for this rule (its fair share), or from an
// npfd that names none, the rule's whole limit.
uint64_t Client::Impl::grantedBudget(const ipc::HelloReply& h) const
{
    uint64_t b = cfg.residentBudget;
    if (!b) {
        b = h.defaultBudget.value_or(h.limits.residentBytes);
        b = std::max<uint64_t>(std::min(b, cfg.regionSize) / cfg.pageSize * cfg.pageSize, cfg.pageSize);
    }
    return std::min(b, cfg.regionSize);
}

void Client::Impl::connect()
{
    ch.emplace(ipc::Channel::connect(cfg.socket));
    // (Delegated, or brokered before its region is made: nothing for it to restore.)
    link = std::make_shared<Link>(memfd ? memfd.get() : -1, spill ? spill.get() : -1, cfg.regionSize, cfg.pageSize);
    ipc::HelloRequest hello;
    hello.name = cfg.name;
    hello.delegate = cfg.mode != ClientMode::Brokered;
    ipc::HelloReply h = call(hello).reply;
    if (h.protocol != hello.protocol) // npfd speaks to each client in the client's version
        throwErrno(EPROTO, "npf client: npfd answered a protocol " + std::to_string(hello.protocol) +
                               " hello in protocol " + std::to_string(h.protocol) + ": not an npfd this client knows");
    if (!h.delegated.empty()) {
        if (!hello.delegate)
            throwErrno(EPROTO, "npf client: npfd delegated " + h.delegated + " to a client that did not offer to run it");
        startDelegated(h);
        return;
    }
    if (cfg.mode == ClientMode::Delegated)
        throwErrno(EOPNOTSUPP, "npf client: npfd does not delegate an interface to this client (its config's "
                               "\"delegate\" names none it may use; it serves " +
                                   (h.ifaces.empty() ? std::string("none") : h.ifaces.front()) +
                                   (h.ifaces.size() > 1 ? ", ..." : "") + "): ask for ClientMode::Brokered or Auto");
    if (!memfd) { // brokered, the first connection: the region npfd will share
        makeSharedRegion();
        link = std::make_shared<Link>(memfd.get(), spill.get(), cfg.regionSize, cfg.pageSize);
    }
    registerRegion(h);
}

void Client::Impl::registerRegion(const ipc::HelloReply& h)
{
    budget = grantedBudget(h);
    releaseBatch = std::max<uint64_t>(cfg.pageSize, std::min<uint64_t>(budget / 16, kReleaseBatchMax));
    // The mapping is registered with a fresh userfaultfd each time: npfd
    // gets it, and this process keeps no copy (were npfd to die, the
    // registration goes with its copy, and a thread touching a page npfd
    // had evicted gets zeros instead of waiting forever) -- but for the
    // installer's of 2 MiB pages, which closes it when npfd hangs up.
    const bool huge = cfg.pageSize != NPF_PAGE_SIZE;
    Userfaultfd uffd = registerUffd(map.get(), cfg.regionSize, huge);
    if (huge)
        installer = std::make_unique<InstallThread>(map.as<uint8_t>(), cfg.regionSize, cfg.pageSize, kInstallImages,
                                                    uffd, ch->fd(), [l = link] { l->lost(); });
    ipc::RegionRequest rq;
    rq.size = cfg.regionSize;
    rq.budget = budget;
    rq.base = reinterpret_cast<uint64_t>(map.get());
    rq.pageSize = static_cast<uint32_t>(cfg.pageSize);
    const int fds[4] = {memfd.get(), uffd.fd(), spill.get(), installer ? installer->areaFd() : -1};
    (void)call(rq, std::span<const int>(fds, installer ? 4 : 3));
}

// What the delegated engine asks of npfd: its flows, over this connection.
NpfdCalls Client::Impl::npfdCalls()
{
    NpfdCalls calls;
    calls.openFlow = [this](const ipc::DelegateFlowRequest& rq, Fd* ring) {
        auto r = call(rq);
        *ring = std::move(r.fds[0]);
        return r.reply;
    };
    calls.closeFlow = [this](uint32_t id) {
        if (!link->isGone()) // npfd removed the flows of a connection that ended
            (void)call(ipc::CloseFlowRequest{id});
    };
    calls.flowStats = [this](uint32_t id, uint16_t port) { return flowStats(id, port, link); };
    calls.lost = [this](bool probe) {
        return (probe ? link->hungUp(ch->fd()) : link->isGone())
                   ? std::string("npfd closed the connection (it exited or restarted): make a new npf::Client")
                   : std::string();
    };
    calls.hangupFd = ch->fd();
    return calls;
}

void Client::Impl::startDelegated(const ipc::HelloReply& h)
{
    budget = grantedBudget(h);
    ipc::DelegateRequest rq;
    rq.size = cfg.regionSize;
    rq.budget = budget;
    rq.pageSize = static_cast<uint32_t>(cfg.pageSize);
    auto d = call(rq);
    std::vector<HandedQueue> queues;
    for (uint32_t q = 0; q < d.reply.queues; q++) {
        auto r = call(ipc::QueueRequest{q});
        queues.push_back({std::move(r.fds[0]), std::move(r.fds[1]), std::move(r.fds[2])});
    }
    EngineConfig ec = cfg.engine;
    ec.ifname = d.reply.iface;
    ec.queues = d.reply.queues;
    ec.regionSize = cfg.regionSize;
    ec.pageSize = cfg.pageSize;
    ec.residentBudget = budget;
    dataplane::ResidentMap bitmap = dataplane::ResidentMap::adopt(std::move(d.fds[0]), geo.bitmapPages());
    engine = std::make_unique<Engine>(std::make_unique<Engine::Impl>(
        ec, std::make_unique<DelegatedXdp>(d.reply, std::move(queues), npfdCalls()), std::move(bitmap)));
    delegated = d.reply.iface;
}

Client::Client(const ClientConfig& cfg) : impl_(std::make_unique<Impl>())
{
    Impl& c = *impl_;
    c.cfg = cfg;
    std::string why;
    if (RegionGeometry::check(cfg.regionSize, cfg.pageSize, cfg.residentBudget, kDefaultBatchPages, &c.geo,
                              &why) != RegionGeometry::Error::None)
        throwErrno(EINVAL, "npf client: region " + why);
    c.connect();
}

void Client::Impl::makeSharedRegion()
{
    const bool huge = geo.huge();
    memfd.reset(::memfd_create("npf-client-region",
                               MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB | kMfdHuge2M : 0)));
    if (!memfd)
        throwErrno(huge ? "memfd_create(MFD_HUGETLB) for the npf region (a kernel with hugetlbfs?)"
                        : "memfd_create for the npf region");
    checkErrno(::ftruncate(memfd.get(), static_cast<off_t>(cfg.regionSize)), "size the npf region memfd");
    // MAP_NORESERVE: a hugetlbfs mapping would otherwise reserve the whole
    // region's huge pages up front; npfd keeps it within its budget.
    map = MmapArea::map(cfg.regionSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd.get(), 0,
                        "the npf region");
    // Where npfd saves what it evicts: this process's, so it survives npfd.
    spill.reset(::memfd_create("npf-client-spill", MFD_CLOEXEC));
    if (!spill)
        throwErrno("memfd_create for the npf region's spill");
    checkErrno(::ftruncate(spill.get(), static_cast<off_t>(cfg.regionSize)), "size the npf spill memfd");
}

Client::~Client()
{
    impl_->flows.clear();
    impl_->engine.reset(); // its flows closed (close_flow), its sockets closed: npfd takes the interface back
    if (impl_->ch && !impl_->link->isGone()) {
        try {
            (void)impl_->call(ipc::ByeRequest{});
        } catch (const std::exception&) {
            // npfd is gone or refused: closing the socket says the same.
        }
    }
    impl_->installer.reset(); // before the socket it watches closes
}

Flow& Client::openFlow(uint16_t port, const std::string& addr, const std::string& iface)
{
    return openFlow(port, FlowOptions{.addr = addr}, iface);
}

Flow& Client::openFlow(uint16_t port, const FlowOptions& opts, const std::string& iface)
{
    Impl& c = *impl_;
    const std::string& addr = opts.addr;
    if (c.engine) {
        if (!iface.empty() && iface != c.delegated)
            throwErrno(EINVAL, "npf client: this client runs the data path of " + c.delegated +
                                   " (delegated mode): a flow on " + iface + " needs a client of its own");
        return c.engine->openFlow(port, opts);
    }
    ipc::OpenFlowRequest rq;
    rq.iface = iface;
    rq.port = port;
    rq.addr = addr;
    if (opts.credits.enabled) {
        if (opts.credits.step == 0 || opts.credits.step > NPF_POST_RING_SIZE)
            throwErrno(EINVAL, "npf client: the credit step must be 1-" + std::to_string(NPF_POST_RING_SIZE));
        rq.creditStep = opts.credits.step;
        rq.creditIntervalUs = static_cast<uint32_t>(std::clamp<int64_t>(opts.credits.interval.count(), 1, 1'000'000));
    }
    auto r = c.call(rq);
    Flow::Impl::Parts parts;
    parts.id = r.reply.flow;
    parts.port = r.reply.port;
    parts.ringMap.emplace(dataplane::FlowRing::adopt(std::move(r.fds[0])));
    parts.ring = parts.ringMap->ring();
    parts.ownCompletions = std::make_unique<CompletionRing>(
        CompletionRing::attach(std::move(r.fds[1]), std::move(r.fds[2]), "npf flow " + std::to_string(port)));
    parts.completions = parts.ownCompletions.get();
    parts.regionSize = c.cfg.regionSize;
    parts.hangupFd = c.ch->fd();
    std::shared_ptr<Link> link = c.link;
    const int sock = c.ch->fd();
    parts.failure = [link, sock] {
        return link->hungUp(sock) ? std::string("npfd closed the connection (it exited or restarted): reconnect "
                                                "and open the flow again")
                                  : std::string();
    };
    parts.error = [link, sock](bool probe) { return (probe ? link->hungUp(sock) : link->isGone()) ? -EPIPE : 0; };
    // The Client owns its flows (and destroys them first): `c` outlives the
    // lambda. `link` pins the connection the flow belongs to.
    parts.stats = [&c, id = parts.id, port = parts.port, link] { return c.flowStats(id, port, link); };
    parts.idle = [&c] { c.flushRelease(); };
    auto flow = std::make_unique<Flow>(std::make_unique<Flow::Impl>(std::move(parts)));
    std::lock_guard<std::mutex> lock(c.flowsMu);
    c.flows.push_back({std::move(flow), link});
    return *c.flows.back().app;
}

void Client::closeFlow(Flow& f)
{
    Impl& c = *impl_;
    if (c.engine) {
        try {
            c.engine->closeFlow(f);
        } catch (const std::invalid_argument& e) {
            throwErrno(EINVAL, e.what());
        }
        return;
    }
    Impl::OpenFlow open;
    {
        std::lock_guard<std::mutex> lock(c.flowsMu);
        auto it = std::find_if(c.flows.begin(), c.flows.end(), [&](const Impl::OpenFlow& o) { return o.app.get() == &f; });
        if (it == c.flows.end())
            throwErrno(EINVAL, "closeFlow: flow " + std::to_string(f.id()) + " is not this client's");
        open = std::move(*it);
        c.flows.erase(it);
    }
    const uint32_t id = open.app->id();
    open.app.reset();
    // A flow of a connection that is gone is closed already (npfd closed it
    // with the connection); its id may name another flow by now.
    if (open.on != c.link || c.link->isGone())
        return;
    try {
        (void)c.call(ipc::CloseFlowRequest{id});
    } catch (const std::system_error& e) {
        if (!c.link->isGone())
            throw;
    }
}

const char* toString(ClientMode m) noexcept
{
    switch (m) {
    case ClientMode::Auto:
        return "auto";
    case ClientMode::Delegated:
        return "delegated";
    case ClientMode::Brokered:
        break;
    }
    return "brokered";
}

ClientMode Client::mode() const noexcept { return impl_->engine ? ClientMode::Delegated : ClientMode::Brokered; }
const std::string& Client::delegatedIface() const noexcept { return impl_->delegated; }

uint8_t* Client::region() const noexcept
{
    return impl_->engine ? impl_->engine->region() : impl_->map.as<uint8_t>();
}
uint64_t Client::regionSize() const noexcept { return impl_->cfg.regionSize; }
uint64_t Client::residentBudget() const noexcept { return impl_->budget; }

const char* Client::route() const noexcept
{
    if (impl_->engine)
        return impl_->engine->impl_->region->route();
    return impl_->cfg.pageSize == NPF_PAGE_SIZE ? routes::kClientMemfd4k : routes::kClientHugetlbfs2m;
}

void Client::release(uint64_t offset, uint64_t len)
{
    Impl& c = *impl_;
    if (c.engine)
        return c.engine->release(offset, len);
    if (offset > c.cfg.regionSize || len > c.cfg.regionSize - offset)
        throwErrno(EINVAL, "release [" + std::to_string(offset) + ", +" + std::to_string(len) +
                               ") is outside the region of " + std::to_string(c.cfg.regionSize) + " bytes");
    if (len == 0)
        return;
    // A hint npfd applies in order with the client's other requests: no need
    // to wait for it (a round trip per call would cost the receive loop).
    // But buffers posted after this call may be received into before npfd
    // gets to it: each flow's published post count now tells npfd which
    // buffers those are, and it leaves their pages out.
    ipc::ReleaseRequest rq{offset, len};
    {
        std::lock_guard<std::mutex> lock(c.flowsMu);
        for (const Impl::OpenFlow& f : c.flows)
            if (f.on == c.link && rq.posted.size() < ipc::ReleaseRequest::kMaxPosted)
                rq.posted.push_back({f.app->impl_->parts.id, f.app->impl_->posts->published()});
    }
    std::lock_guard<std::mutex> lock(c.mu);
    try {
        std::optional<ipc::ReleaseRequest>& held = c.pendingRelease;
        if (held && offset <= held->offset + held->len && held->offset <= offset + len) {
            // Adjoins (or overlaps) what is held: one range. The held post
            // counts are the earlier ones: they leave out every buffer posted
            // since this release too.
            const uint64_t end = std::max(held->offset + held->len, offset + len);
            held->offset = std::min(held->offset, offset);
            held->len = end - held->offset;
        } else {
            c.sendReleaseLocked();
            held = std::move(rq);
            c.releasePending.store(true, std::memory_order_release);
        }
        if (held->len >= c.releaseBatch)
            c.sendReleaseLocked();
    } catch (const std::system_error& e) {
        c.noteLoss(e);
        throw;
    }
}

uint64_t Client::populate(uint64_t offset, uint64_t len)
{
    if (impl_->engine)
        return impl_->engine->populate(offset, len);
    return impl_->call(ipc::PopulateRequest{offset, len}).reply.pages;
}

EngineStats Client::stats() const
{
    if (impl_->engine)
        return impl_->engine->stats();
    auto r = impl_->call(ipc::StatsRequest{});
    return counters::parseEngineStats(r.reply.stats);
}

std::string Client::statsJson() const
{
    if (impl_->engine)
        return impl_->engine->statsJson();
    counters::Json j = counters::engineStatsJson(stats(), impl_->delegated, ::getpid(), 0);
    j["route"] = route();
    return j.dump();
}

std::string Client::failure() const
{
    if (impl_->engine)
        return impl_->engine->failure(); // the interface gone, or npfd (NpfdCalls::lost)
    return impl_->link->hungUp(impl_->ch->fd()) ? "npfd closed the connection (it exited or restarted): reconnect()"
                                                : "";
}

uint64_t Client::restoredPages() const noexcept
{
    return impl_->link->restoredPages.load(std::memory_order_acquire);
}

void Client::reconnect()
{
    Impl& c = *impl_;
    if (c.engine)
        throwErrno(EOPNOTSUPP, "npf client: reconnect in delegated mode (the region is this client's engine's, "
                               "and ends with it): make a new npf::Client");
    {
        std::lock_guard<std::mutex> lock(c.mu);
        // Closing our end ends npfd's session (if it still has one) only
        // after it is through with the region: wait for its side to close
        // before the evicted content comes back.
        if (!c.link->isGone()) {
            ::shutdown(c.ch->fd(), SHUT_WR);
            pollfd p{c.ch->fd(), POLLIN, 0};
            (void)::poll(&p, 1, static_cast<int>(c.cfg.timeout.count()));
        }
        c.pendingRelease.reset(); // for the old registration: moot
        c.releasePending.store(false, std::memory_order_relaxed);
        c.installer.reset(); // (its uffd copy: the old registration ends with npfd's)
        c.link->lost(); // the old flows are dead for good; evicted content comes home
        c.ch.reset();
    }
    c.connect();
}

} // namespace npf
