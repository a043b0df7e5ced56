#include <fcntl.h>
#include <sched.h>
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
    ctl::AttachResult r = ctl::attach(opt);
    NPF_INFO("attached npf_xdp to %s (%s, prog id %u, %u queues)", r.ifname.c_str(), ctl::toString(r.mode),
             r.progId, r.queues);
    *attached = true;
    return ctl::Dataplane::open(cfg.ifname);
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
        workers.clear();
        pager.reset();
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
    if (!ctl::xskSlots(*dp).empty())
        throw ctl::StateError(EBUSY, "another npf engine has sockets bound on " + cfg.ifname +
                                         " (npfctl status " + cfg.ifname + ")");
    bitmap.emplace(ctl::ResidentMap::create(cfg.regionSize / NPF_PAGE_SIZE));
    flows = std::make_unique<FlowTable>(*dp, cfg);
    flows->withdrawStale();

    RegionConfig rc;
    rc.size = cfg.regionSize;
    rc.residentBudget = cfg.residentBudget;
    // Block: XDP must see every page as resident (all to the primary ring),
    // so the region keeps its real bits to itself.
    rc.residentBitmap = cfg.faultPolicy == FaultPolicy::Block ? nullptr : bitmap->words(); // cleared by the region
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
        std::memset(bitmap->words(), 0xff, bitmap->wordCount() * sizeof(uint64_t));

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
        queues.push_back(std::make_unique<xsk::QueueSockets>(qc, flows->set(), dp->xsks()));
    }
    statsPath = cfg.statsPath.empty() ? ctl::engineStatsPath(cfg.ifname) : cfg.statsPath;
    Pager::Hooks hooks;
    hooks.tick = [this] { writeStatsFile(); };
    hooks.gone = [this] {
        ifaceGone.store(true, std::memory_order_release);
        for (auto& w : workers)
            w->requestStop();
    };
    pager = std::make_unique<Pager>(cfg, *region, *flows, queues, sizes.frameSize * sizes.framesPerPacket,
                                    std::move(hooks));
    for (uint32_t q = 0; q < nq; q++)
        workers.push_back(std::make_unique<Worker>(cfg, *queues[q], *region, epochs, *flows, *pager,
                                                   q < cfg.workerCpus.size() ? cfg.workerCpus[q] : -1));
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
    workers.clear();
    pager.reset();
    queues.clear(); // sockets leave the XSKMAP: XDP fails open to the kernel stack
    flows->close();
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
    pager->start();
    for (auto& w : workers)
        w->start();
}

void Engine::Impl::stopThreads() noexcept
{
    for (auto& w : workers)
        w->stop();
    if (pager)
        pager->stop();
}

Engine::Engine(const EngineConfig& cfg) : impl_(std::make_unique<Impl>(cfg))
{
    impl_->startThreads();
}

Engine::~Engine() = default;

Flow& Engine::openFlow(uint16_t port, const std::string& addr)
{
    return impl_->flows->open(ctl::parseFlowSpec(std::to_string(port), addr), *impl_->region,
                              ctl::RegionBinding{impl_->bitmap->fd(), impl_->region->size()});
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
