#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "engine/engine_impl.h"
#include "engine/flow_impl.h"
#include "region/route_probe.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf {
namespace {

RegionGeometry checkRegion(const EngineConfig& cfg)
{
    RegionGeometry g;
    std::string why;
    if (RegionGeometry::check(cfg.regionSize, cfg.pageSize, cfg.residentBudget, kDefaultBatchPages, &g,
                              &why) != RegionGeometry::Error::None)
        throw ArgumentError("engine on " + cfg.ifname + ": region " + why);
    return g;
}

// Where the region's pages live (RegionMemory says what each one is).
RegionBacking regionBacking(const EngineConfig& cfg)
{
    const bool huge = cfg.pageSize != NPF_PAGE_SIZE;
    if (cfg.reserve && cfg.regionMemory == RegionMemory::Memfd)
        throw ArgumentError("engine on " + cfg.ifname + ": a reserve is for private memory (region memory Auto, "
                            "PagePool or Anonymous); a memfd's 2 MiB pages are reserved in the kernel's huge page "
                            "pool (/proc/sys/vm/nr_hugepages)");
    switch (cfg.regionMemory) {
    case RegionMemory::Auto:
        if (!huge) // whichever cycle is cheaper on this host (region/route_probe.h)
            return routes4k().poolFaster() ? RegionBacking::Pool : RegionBacking::Anonymous;
        return userfaultfdHasMove() && transparentHugePagesOffered() ? RegionBacking::Pool : RegionBacking::Memfd;
    case RegionMemory::PagePool:
        return RegionBacking::Pool;
    case RegionMemory::Anonymous:
        if (huge)
            throw ArgumentError("engine on " + cfg.ifname +
                                ": anonymous region memory takes 4 KiB pages (2 MiB pages: the page pool, or a memfd)");
        return RegionBacking::Anonymous;
    case RegionMemory::Memfd:
        break;
    }
    return RegionBacking::Memfd;
}

} // namespace

Engine::Impl::Impl(const EngineConfig& c) : cfg(c)
{
    const RegionGeometry geo = checkRegion(cfg);
    if (cfg.ifname.empty())
        throw ArgumentError("engine: no interface given");
    service = std::make_unique<Service>(cfg);
    bitmap.emplace(dataplane::ResidentMap::create(geo.bitmapPages()));
    makeRegion(false);
}

Engine::Impl::Impl(const EngineConfig& c, std::unique_ptr<XdpLink> link, dataplane::ResidentMap map) : cfg(c)
{
    (void)checkRegion(cfg);
    bitmap.emplace(std::move(map));
    service = std::make_unique<Service>(cfg, std::move(link));
    makeRegion(true);
}

void Engine::Impl::makeRegion(bool userModeOnly)
{
    RegionConfig rc;
    rc.size = cfg.regionSize;
    rc.pageSize = cfg.pageSize;
    rc.backing = regionBacking(cfg);
    rc.reservePages = cfg.reserve / cfg.pageSize; // the region takes at most its own
    rc.residentBudget = cfg.residentBudget;
    // Block: XDP must see every page as resident (all to the primary ring),
    // so the region keeps its real bits to itself.
    rc.residentBitmap = cfg.faultPolicy == FaultPolicy::Block ? nullptr : bitmap->words(); // cleared by the region
    rc.epochs = &service->epochs();
    rc.spillDir = cfg.spillDir;
    rc.name = "npf-region-" + cfg.ifname;
    rc.userModeOnly = userModeOnly;
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
    service->addRegion(*region);
}

Engine::Impl::~Impl()
{
    flows.clear();
    service.reset();
    region.reset();
}

Engine::Engine(const EngineConfig& cfg) : Engine(std::make_unique<Impl>(cfg)) {}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl))
{
    impl_->service->start();
}

Engine::~Engine() = default;

Flow& Engine::openFlow(uint16_t port, const std::string& addr) { return openFlow(port, FlowOptions{.addr = addr}); }

Flow& Engine::openFlow(uint16_t port, const FlowOptions& opts)
{
    Impl& e = *impl_;
    ServedFlow& served = e.service->openFlow(dataplane::parseFlowSpec(std::to_string(port), opts.addr), *e.region,
                                             dataplane::RegionBinding{e.bitmap->fd(), e.region->size()}, false,
                                             opts.credits);
    Flow::Impl::Parts parts;
    parts.id = served.id;
    parts.port = served.spec.port;
    parts.ring = served.ringMap.ring();
    parts.completions = &served.ring;
    parts.regionSize = e.region->size();
    parts.region = e.region.get();
    Service* svc = e.service.get();
    parts.failure = [svc] { return svc->failure(); };
    // Delegated (npf::Client): -EPIPE once npfd hung up, as for its brokered flows.
    parts.error = [svc](bool probe) { return svc->ifaceGone() ? -ENODEV : svc->linkLost(probe) ? -EPIPE : 0; };
    parts.hangupFd = svc->hangupFd();
    parts.stats = [svc, &served] { return svc->flowStats(served); };
    if (e.cfg.runToCompletion) {
        parts.runFastPath = [svc] { return svc->runFastPath(); };
        parts.fastPathFds = svc->fastPathFds();
    }
    std::unique_ptr<Flow> flow;
    try {
        flow = std::make_unique<Flow>(std::make_unique<Flow::Impl>(std::move(parts)));
    } catch (...) {
        e.service->closeFlow(served); // its event set could not be made: the port goes back
        throw;
    }
    std::lock_guard<std::mutex> lock(e.flowsMu);
    e.flows.push_back({std::move(flow), &served});
    return *e.flows.back().app;
}

void Engine::closeFlow(Flow& f)
{
    Impl& e = *impl_;
    Impl::OpenFlow open;
    {
        std::lock_guard<std::mutex> lock(e.flowsMu);
        auto it = std::find_if(e.flows.begin(), e.flows.end(), [&](const Impl::OpenFlow& o) { return o.app.get() == &f; });
        if (it == e.flows.end())
            throw std::invalid_argument("closeFlow: flow " + std::to_string(f.id()) + " is not this engine's");
        open = std::move(*it);
        e.flows.erase(it);
    }
    // XDP stops steering to it and the workers are through with it before the
    // application's side lifts the protection of its outstanding buffers.
    e.service->closeFlow(*open.served);
    open.app.reset();
}

std::string Engine::failure() const { return impl_->service->failure(); }

uint8_t* Engine::region() const noexcept { return impl_->region->base(); }
uint64_t Engine::regionSize() const noexcept { return impl_->region->size(); }
uint32_t Engine::queues() const noexcept { return impl_->service->queues(); }
bool Engine::attachedByUs() const noexcept { return impl_->service->attachedByUs(); }
EngineStats Engine::stats() const { return impl_->service->stats(); }
std::string Engine::statsJson() const { return impl_->service->statsJson(); }
std::array<uint64_t, NPF_STAT_MAX> Engine::xdpCounters() const { return impl_->service->xdpCounters(); }

// A region call's result: pages, or an exception naming what failed.
static uint64_t pagesOr(int rc, const char* what, uint64_t offset, uint64_t len)
{
    if (rc < 0)
        throwErrno(-rc, std::string(what) + " [" + std::to_string(offset) + ", +" + std::to_string(len) +
                            ") of the region");
    return static_cast<uint64_t>(rc);
}

void Engine::release(uint64_t offset, uint64_t len)
{
    (void)pagesOr(impl_->region->release(offset, len), "release", offset, len);
}

uint64_t Engine::populate(uint64_t offset, uint64_t len)
{
    return pagesOr(impl_->region->prefetch(offset, len), "populate", offset, len);
}

uint64_t Engine::evictAll()
{
    int rc = impl_->region->evictAll();
    if (rc < 0)
        throwErrno(-rc, "evict the region of " + impl_->cfg.ifname);
    return static_cast<uint64_t>(rc);
}

} // namespace npf
