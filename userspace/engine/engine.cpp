#include <fcntl.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "ctl/attach.h"
#include "ctl/engine_stats.h"
#include "ctl/errors.h"
#include "ctl/pins.h"
#include "ctl/xsk_slots.h"
#include "engine/engine_impl.h"
#include "sys/error.h"
#include "sys/log.h"
#include "xsk/sizing.h"

namespace npf {
namespace {

ctl::Dataplane openOrAttach(const EngineConfig& cfg, bool* attached)
{
    ctl::ensureBpffs();
    try {
        return ctl::Dataplane::open(cfg.ifname);
    } catch (const ctl::StateError& e) {
        if (e.code().value() != ENOENT)
            throw;
    }
    ctl::AttachOptions opt;
    opt.ifname = cfg.ifname;
    opt.mode = cfg.mode == XdpMode::Native ? ctl::AttachMode::Native : ctl::AttachMode::Skb;
    opt.regionPages = cfg.regionSize / NPF_PAGE_SIZE;
    ctl::AttachResult r = ctl::attach(opt);
    NPF_INFO("attached npf_xdp to %s (%s, prog id %u, %u queues)", r.ifname.c_str(), ctl::toString(r.mode),
             r.progId, r.queues);
    *attached = true;
    return ctl::Dataplane::open(cfg.ifname);
}

// No engine serves the flow any more, and its posts are gone: XDP passes
// its datagrams to the kernel.
void withdraw(npf_cursor* cur) noexcept
{
    __atomic_fetch_and(&cur->flags, ~uint32_t(NPF_CURSOR_F_SERVED), __ATOMIC_RELEASE);
    __atomic_store_n(&cur->prod, __atomic_load_n(&cur->cons, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

void checkConfig(const EngineConfig& cfg)
{
    auto bad = [&](const std::string& what) { throw ctl::ArgumentError("engine on " + cfg.ifname + ": " + what); };
    if (cfg.ifname.empty())
        bad("no interface given");
    if (cfg.regionSize == 0 || cfg.regionSize % NPF_PAGE_SIZE)
        bad("region size " + std::to_string(cfg.regionSize) + " is not a positive multiple of 4096");
    if (cfg.regionSize / NPF_PAGE_SIZE > NPF_MAX_REGION_PAGES)
        bad("region size " + std::to_string(cfg.regionSize) + " exceeds the 1 TiB limit");
    if (cfg.completionRingSize < NPF_POST_RING_SIZE || (cfg.completionRingSize & (cfg.completionRingSize - 1)))
        bad("completion ring size must be a power of two >= " + std::to_string(NPF_POST_RING_SIZE));
    if (cfg.reorderTimeout.count() <= 0)
        bad("reorder timeout must be positive");
}

} // namespace

Engine::Impl::Impl(const EngineConfig& c) : cfg(c)
{
    checkConfig(cfg);
    netns.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!netns)
        throwErrno("open /proc/thread-self/ns/net");
    dp.emplace(openOrAttach(cfg, &attachedByUs));
    try {
        setUp();
    } catch (...) {
        // The destructor does not run for a half-built engine: undo the attach here.
        queues.clear();
        if (attachedByUs) {
            try {
                ctl::detach(cfg.ifname);
            } catch (const std::exception& e) {
                NPF_WARN("detaching npf from %s after a failed start: %s", cfg.ifname.c_str(), e.what());
            }
        }
        throw;
    }
}

void Engine::Impl::setUp()
{
    if (dp->regionPages() * NPF_PAGE_SIZE < cfg.regionSize)
        throw ctl::StateError(EINVAL, "npf on " + cfg.ifname + " is attached for a region of " +
                                          std::to_string(dp->regionPages()) + " pages, the engine needs " +
                                          std::to_string(cfg.regionSize / NPF_PAGE_SIZE) +
                                          ": detach it, or attach with --region-pages >= that");
    if (!ctl::xskSlots(*dp).empty())
        throw ctl::StateError(EBUSY, "another npf engine has sockets bound on " + cfg.ifname +
                                         " (npfctl status " + cfg.ifname + ")");
    maps.emplace(*dp);

    // Posts left by a previous engine point into a region that is gone:
    // discard them, and mark the flows unserved until this engine posts,
    // before any socket is bound (XDP claims nothing until then).
    for (const ctl::FlowInfo& f : ctl::listFlows(*dp))
        withdraw(maps->cursor(f.id));

    RegionConfig rc;
    rc.size = cfg.regionSize;
    rc.residentBudget = cfg.residentBudget;
    // Block: XDP must see every page as resident (all to the primary ring),
    // so the region keeps its real bits to itself.
    rc.residentBitmap = cfg.faultPolicy == FaultPolicy::Block ? nullptr : maps->resident(); // cleared by the region
    rc.epochs = &epochs;
    rc.spillDir = cfg.spillDir;
    rc.name = "npf-region-" + cfg.ifname;
    try {
        region = std::make_unique<Region>(rc);
    } catch (const std::system_error& e) {
        if (rc.spillDir.empty())
            throw;
        NPF_WARN("%s; saving evicted content in memory instead (set spillDir to a directory that supports "
                 "O_TMPFILE)", e.what());
        rc.spillDir.clear();
        region = std::make_unique<Region>(rc);
    }
    if (cfg.faultPolicy == FaultPolicy::Block)
        std::memset(maps->resident(), 0xff, dp->regionPages() / 64 * sizeof(uint64_t));

    wakeFd.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wakeFd)
        throwErrno("eventfd for the npf pager");

    uint32_t nq = cfg.queues ? cfg.queues : dp->queues();
    if (nq > dp->queues())
        throw ctl::ArgumentError("engine on " + cfg.ifname + ": " + std::to_string(nq) +
                                 " queues requested, the program serves " + std::to_string(dp->queues()));
    const uint32_t mtu = xsk::interfaceMtu(static_cast<uint32_t>(dp->ifindex()));
    const xsk::QueueSizes sizes =
        xsk::queueSizes(mtu, NPF_POST_RING_SIZE, cfg.frameSize, cfg.frameCount, cfg.rxRingSize);
    NPF_INFO("%s: MTU %u, %u-byte UMEM frames, %u per largest packet", cfg.ifname.c_str(), mtu, sizes.frameSize,
             sizes.framesPerPacket);
    for (uint32_t q = 0; q < nq; q++) {
        xsk::QueueConfig qc;
        qc.ifindex = static_cast<uint32_t>(dp->ifindex());
        qc.queue = q;
        qc.umem.frameSize = sizes.frameSize;
        qc.umem.frameCount = sizes.frameCount;
        qc.primaryRxSize = sizes.rxRingSize;
        qc.backupRxSize = sizes.rxRingSize;
        qc.regionBytes = cfg.regionSize;
        queues.push_back(std::make_unique<xsk::QueueSockets>(qc, flowSet, dp->xsks()));
        fastTotal.push_back(std::make_unique<LatencyHistogram>());
    }
    statsPath = cfg.statsPath.empty() ? ctl::engineStatsPath(cfg.ifname) : cfg.statsPath;
}

Engine::Impl::~Impl()
{
    stopThreads();
    // The interface name means something only in the engine's namespace.
    Fd here(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    const bool moved = here && setns(netns.get(), CLONE_NEWNET) == 0;
    if (!moved)
        NPF_WARN("engine on %s: cannot enter its network namespace for teardown: %s", cfg.ifname.c_str(),
                 strerror(errno));
    queues.clear(); // sockets leave the XSKMAP: XDP fails open to the kernel stack
    for (auto& f : flows) {
        // Withdraw the posts: they point into a region that is about to go.
        withdraw(f->impl_->cursor);
        if (!f->impl_->ownsEntry)
            continue;
        try {
            ctl::delFlow(*dp, f->impl_->spec, ctl::FlowEntry{f->impl_->id, f->impl_->gen});
        } catch (const std::exception& e) {
            NPF_WARN("removing flow %u: %s", f->impl_->id, e.what());
        }
    }
    ::unlink(statsPath.c_str());
    // /run/npf/netns-<inode>/<ifname>, then the namespace's directory once empty
    const std::string dir = statsPath.substr(0, statsPath.rfind('/'));
    ::rmdir(dir.c_str());
    ::rmdir(dir.substr(0, dir.rfind('/')).c_str());
    if (attachedByUs && moved)
        detachOnExit();
    if (moved)
        (void)setns(here.get(), CLONE_NEWNET);
}

void Engine::Impl::detachOnExit() noexcept
{
    // An interface that is gone took the program with it: force removes the
    // pins this engine created.
    try {
        ctl::detach(cfg.ifname, ifaceGone.load(std::memory_order_acquire));
    } catch (const std::exception& e) {
        NPF_WARN("detaching npf from %s: %s", cfg.ifname.c_str(), e.what());
    }
}

void Engine::Impl::startThreads()
{
    barrierThread = std::thread([this] { barrierLoop(); });
    pager = std::thread([this] { pagerLoop(); });
    for (size_t q = 0; q < queues.size(); q++) {
        int cpu = q < cfg.workerCpus.size() ? cfg.workerCpus[q] : -1;
        workers.emplace_back([this, q, cpu] { workerLoop(*queues[q], *fastTotal[q], cpu); });
    }
}

void Engine::Impl::stopThreads() noexcept
{
    {
        std::lock_guard<std::mutex> lock(barrierMu);
        stop.store(true, std::memory_order_release);
    }
    barrierCv.notify_all();
    wakePager();
    for (auto& t : workers)
        if (t.joinable())
            t.join();
    if (pager.joinable())
        pager.join();
    if (barrierThread.joinable())
        barrierThread.join();
    workers.clear();
}

void Engine::Impl::wakePager() noexcept
{
    uint64_t one = 1;
    if (wakeFd)
        (void)!::write(wakeFd.get(), &one, sizeof(one));
}

Engine::Engine(const EngineConfig& cfg) : impl_(std::make_unique<Impl>(cfg))
{
    impl_->startThreads();
}

Engine::~Engine() = default;

Flow& Engine::openFlow(uint16_t port, const std::string& addr)
{
    Impl& e = *impl_;
    ctl::FlowSpec spec = ctl::parseFlowSpec(std::to_string(port), addr);
    std::lock_guard<std::mutex> lock(e.flowsMu);
    for (auto& f : e.flows)
        if (f->impl_->spec == spec)
            throw ctl::StateError(EEXIST, "flow " + ctl::toString(spec) + " is already open on " + e.cfg.ifname);
    ctl::FlowOrigin origin;
    const ctl::FlowEntry entry = ctl::openEngineFlow(*e.dp, spec, &origin);
    const bool owns = origin != ctl::FlowOrigin::FromOperator;
    npf_cursor* cur = e.maps->cursor(entry.id);
    uint64_t start = __atomic_load_n(&cur->cons, __ATOMIC_ACQUIRE);
    __atomic_store_n(&cur->prod, start, __ATOMIC_RELEASE);
    auto impl = std::make_unique<Flow::Impl>(e, entry, spec, owns, start);
    Flow::Impl* raw = impl.get();
    e.flows.push_back(std::make_unique<Flow>(std::move(impl)));
    e.flowById[entry.id].store(raw, std::memory_order_release);
    e.flowSet.open(entry.id);
    static constexpr const char* kOrigin[] = {
        "", " (taken over from an engine that exited: removed when this one exits)",
        " (added by npfctl: left in place when this engine exits)"};
    NPF_INFO("flow %u: %s on %s%s", entry.id, ctl::toString(spec).c_str(), e.cfg.ifname.c_str(),
             kOrigin[static_cast<int>(origin)]);
    return *e.flows.back();
}

std::string Engine::failure() const
{
    if (impl_->ifaceGone.load(std::memory_order_acquire))
        return impl_->cfg.ifname + " is gone (deleted, or moved out of this network namespace)";
    return "";
}

uint8_t* Engine::region() const noexcept { return impl_->region->base(); }
uint64_t Engine::regionSize() const noexcept { return impl_->region->size(); }
uint32_t Engine::queues() const noexcept { return static_cast<uint32_t>(impl_->queues.size()); }
bool Engine::attachedByUs() const noexcept { return impl_->attachedByUs; }

void Engine::release(uint64_t offset, uint64_t len)
{
    int rc = impl_->region->release(offset, len);
    if (rc < 0)
        throwErrno(-rc, "release [" + std::to_string(offset) + ", +" + std::to_string(len) + ") of the region");
}

uint64_t Engine::populate(uint64_t offset, uint64_t len)
{
    int rc = impl_->region->prefetch(offset, len);
    if (rc < 0)
        throwErrno(-rc, "populate [" + std::to_string(offset) + ", +" + std::to_string(len) + ") of the region");
    return static_cast<uint64_t>(rc);
}

uint64_t Engine::evictAll()
{
    int rc = impl_->region->evictAll();
    if (rc < 0)
        throwErrno(-rc, "evict the region of " + impl_->cfg.ifname);
    return static_cast<uint64_t>(rc);
}

} // namespace npf
