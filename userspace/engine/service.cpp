#include "engine/service.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <thread>

#include "counters/engine_stats.h"
#include "dataplane/attach.h"
#include "dataplane/iface.h"
#include "dataplane/pins.h"
#include "dataplane/stats.h"
#include "dataplane/xsk_slots.h"
#include "engine/queue_plan.h"
#include "region/region.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/netns.h"
#include "xsk/sizing.h"

namespace npf {
namespace {

dataplane::Dataplane openOrAttach(const EngineConfig& cfg, bool* attached)
{
    dataplane::ensureBpffs();
    try {
        dataplane::Dataplane dp = dataplane::Dataplane::open(cfg.ifname);
        if (!cfg.xdpThenPin.empty() || cfg.xdpThenExisting)
            NPF_INFO("npf_xdp is attached to %s already: the program to chain behind it is not applied (npfctl "
                     "status %s shows what is chained)",
                     cfg.ifname.c_str(), cfg.ifname.c_str());
        return dp;
    } catch (const StateError& e) {
        if (e.code().value() != ENOENT)
            throw;
    }
    dataplane::AttachOptions opt;
    opt.ifname = cfg.ifname;
    opt.mode = cfg.mode == XdpMode::Native ? dataplane::AttachMode::Native : dataplane::AttachMode::Skb;
    opt.thenPin = cfg.xdpThenPin;
    opt.thenExisting = cfg.xdpThenExisting;
    dataplane::AttachResult r = dataplane::attach(opt);
    NPF_INFO("attached npf_xdp to %s (%s, prog id %u, %u queues)", r.ifname.c_str(), dataplane::toString(r.mode),
             r.progId, r.queues);
    if (r.chained)
        NPF_INFO("chained '%s' (prog id %u) behind npf_xdp on %s%s", r.chained->name.c_str(), r.chained->id,
                 r.ifname.c_str(), r.tookOver ? ", in its place" : "");
    *attached = true;
    return dataplane::Dataplane::open(cfg.ifname);
}

// More would only contend for the regions' locks.
constexpr uint32_t kMaxPagers = 64;

} // namespace

Service::Service(const EngineConfig& c, EpochDomain* epochs)
    : cfg_(c), ownEpochs_(epochs ? nullptr : std::make_unique<EpochDomain>()), epochs_(epochs ? *epochs : *ownEpochs_)
{
    if (cfg_.ifname.empty())
        throw ArgumentError("engine: no interface given");
    if (cfg_.completionRingSize < NPF_POST_RING_SIZE || (cfg_.completionRingSize & (cfg_.completionRingSize - 1)))
        throw ArgumentError("engine on " + cfg_.ifname + ": completion ring size must be a power of two >= " +
                            std::to_string(NPF_POST_RING_SIZE));
    if (cfg_.reorderTimeout.count() <= 0)
        throw ArgumentError("engine on " + cfg_.ifname + ": reorder timeout must be positive");
    if (cfg_.pagerThreads < 1 || cfg_.pagerThreads > kMaxPagers)
        throw ArgumentError("engine on " + cfg_.ifname + ": pager threads must be 1.." +
                            std::to_string(kMaxPagers) + ", not " + std::to_string(cfg_.pagerThreads));
    netns_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!netns_)
        throwErrno("open /proc/thread-self/ns/net");
    dp_.emplace(openOrAttach(cfg_, &attachedByUs_));
    try {
        setUp();
    } catch (...) {
        // The destructor does not run for a half-built service: undo the attach here.
        workers_.clear();
        pagers_.clear();
        queues_.clear();
        if (attachedByUs_)
            detachOnExit();
        throw;
    }
}

void Service::setUp()
{
    if (!dataplane::xskSlots(*dp_).empty())
        throw StateError(EBUSY, "another npf engine has sockets bound on " + cfg_.ifname +
                                    " (npfctl status " + cfg_.ifname + ")");
    flows_ = std::make_unique<FlowTable>(*dp_, cfg_);
    flows_->withdrawStale();

    uint32_t nq = cfg_.queues ? cfg_.queues : dp_->queues();
    if (nq > dp_->queues())
        throw ArgumentError("engine on " + cfg_.ifname + ": " + std::to_string(nq) +
                            " queues requested, the program serves " + std::to_string(dp_->queues()));
    const uint32_t mtu = dataplane::linkMtu(cfg_.ifname); // in this (the service's) network namespace
    const xsk::QueueSizes sizes = serviceQueueSizes(cfg_, mtu);
    NPF_INFO("%s: MTU %u, %u-byte UMEM frames, %u per largest packet", cfg_.ifname.c_str(), mtu, sizes.frameSize,
             sizes.framesPerPacket);
    for (uint32_t q = 0; q < nq; q++) {
        xsk::QueueConfig qc;
        qc.ifindex = static_cast<uint32_t>(dp_->ifindex());
        qc.queue = q;
        qc.umem.frameSize = sizes.frameSize;
        qc.umem.frameCount = sizes.frameCount;
        qc.primaryRxSize = sizes.rxRingSize;
        qc.backupRxSize = sizes.rxRingSize;
        // Each flow bounds its datagrams by its own region (ServedFlow::claim).
        qc.regionBytes = NPF_MAX_REGION_PAGES * NPF_PAGE_SIZE;
        queues_.push_back(std::make_unique<xsk::QueueSockets>(qc, flows_->set(), dp_->xsks()));
    }
    statsPath_ = cfg_.statsPath.empty() ? counters::engineStatsPath(cfg_.ifname) : cfg_.statsPath;
    PagerHooks hooks;
    hooks.tick = [this] { writeStatsFile(); };
    hooks.gone = [this] {
        ifaceGone_.store(true, std::memory_order_release);
        for (auto& w : workers_)
            w->requestStop();
    };
    const uint32_t np = cfg_.pagerThreads;
    wakers_ = std::make_unique<PagerWakers>(np);
    pagerCtx_ = std::make_unique<PagerContext>(
        PagerContext{cfg_, regions_, *flows_, queues_, *wakers_, sizes.frameSize * sizes.framesPerPacket, std::move(hooks)});
    for (uint32_t k = 0; k < np; k++)
        pagers_.push_back(std::make_unique<Pager>(*pagerCtx_, PagerShard{k, np, nq}));
    if (np > 1)
        NPF_INFO("%s: %u pagers (queue q's backup ring: pager q %% %u; regions round robin after the queues)",
                 cfg_.ifname.c_str(), np, np);
    for (uint32_t q = 0; q < nq; q++)
        workers_.push_back(std::make_unique<Worker>(cfg_, *queues_[q], epochs_, *flows_, *pagers_[q % np],
                                                    q < cfg_.workerCpus.size() ? cfg_.workerCpus[q] : -1));
}

void Service::start()
{
    for (auto& p : pagers_)
        p->start();
    for (auto& w : workers_)
        w->start();
    started_ = true;
}

uint32_t Service::runFastPath() noexcept
{
    uint32_t n = 0;
    for (auto& w : workers_)
        n += w->step();
    return n;
}

std::vector<int> Service::fastPathFds() const
{
    std::vector<int> fds;
    for (const auto& w : workers_)
        fds.push_back(w->primaryFd());
    return fds;
}

void Service::stopThreads() noexcept
{
    for (auto& w : workers_)
        w->stop();
    for (auto& p : pagers_)
        p->stop();
}

void Service::syncPagers() noexcept
{
    for (auto& p : pagers_)
        p->sync();
}

Service::PagerTickets Service::askPagers()
{
    PagerTickets t;
    for (auto& p : pagers_)
        t.push_back(p->askSync());
    return t;
}

bool Service::pagersSynced(const PagerTickets& t) noexcept
{
    for (size_t i = 0; i < t.size() && i < pagers_.size(); i++)
        if (!pagers_[i]->synced(t[i]))
            return false;
    return true;
}

Service::~Service()
{
    stopThreads();
    // The interface name means something only in the service's namespace.
    std::optional<NetnsScope> in;
    try {
        in.emplace(netns_.get(), "of " + cfg_.ifname);
    } catch (const std::exception& e) {
        NPF_WARN("engine on %s: teardown: %s", cfg_.ifname.c_str(), e.what());
    }
    const bool moved = in.has_value();
    workers_.clear();
    pagers_.clear();
    queues_.clear(); // sockets leave the XSKMAP: XDP fails open to the kernel stack
    flows_->closeAll();
    ::unlink(statsPath_.c_str());
    // /run/npf/netns-<inode>/<ifname>, then the namespace's directory once empty
    const std::string dir = statsPath_.substr(0, statsPath_.rfind('/'));
    ::rmdir(dir.c_str());
    ::rmdir(dir.substr(0, dir.rfind('/')).c_str());
    if (attachedByUs_ && moved)
        detachOnExit();
}

void Service::detachOnExit() noexcept
{
    // An interface that is gone took the program with it: force removes the
    // pins this service created.
    try {
        dataplane::detach(cfg_.ifname, ifaceGone_.load(std::memory_order_acquire));
    } catch (const std::exception& e) {
        NPF_WARN("detaching npf from %s: %s", cfg_.ifname.c_str(), e.what());
    }
}

void Service::addRegion(Region& r) { regions_.add(&r); }

void Service::removeRegion(Region& r) noexcept
{
    regions_.remove(&r);
    syncPagers();
    // Its counts stay in the totals (they are monotonic; resident pages are not among them).
    const RegionStats s = r.stats();
    std::lock_guard<std::mutex> lock(retiredMu_);
    addCounters(kRegionCounters, retiredRegions_, s);
}

ServedFlow& Service::openFlow(const dataplane::FlowSpec& spec, Region& region, const dataplane::RegionBinding& binding,
                              bool fresh)
{
    return flows_->open(spec, region, binding, fresh);
}

void Service::barrier() noexcept
{
    // Workers: every batch that began before has ended (each batch is an
    // epoch section, and so is its publishing).
    const uint64_t e = epochs_.advance();
    while (!epochs_.passed(e))
        std::this_thread::yield();
    // The pagers: a whole round of each began after (and took the deferred
    // datagrams the workers pushed).
    syncPagers();
}

void Service::closeFlow(ServedFlow& f) noexcept
{
    flows_->close(f, [&] {
        barrier();
        // Nothing completes into it any more: its counts join the totals.
        const SequencerStats q = f.seq.stats();
        std::lock_guard<std::mutex> lock(retiredMu_);
        retired_ += q;
    });
}

void Service::loops(const std::string& prefix, std::vector<LoopProgress>& out) const
{
    if (!started_ || ifaceGone())
        return;
    for (size_t q = 0; q < workers_.size(); q++)
        if (!cfg_.runToCompletion) // else the workers have no thread to watch
            out.push_back({prefix + "npf-worker-" + std::to_string(q), workers_[q]->rounds()});
    for (size_t k = 0; k < pagers_.size(); k++)
        out.push_back({prefix + (k ? "npf-pager" + std::to_string(k) : std::string("npf-pager")), pagers_[k]->rounds()});
}

std::string Service::failure() const
{
    if (ifaceGone_.load(std::memory_order_acquire))
        return cfg_.ifname + " is gone (deleted, or moved out of this network namespace)";
    return "";
}

std::array<uint64_t, NPF_STAT_MAX> Service::xdpCounters() const { return dataplane::readXdpStats(*dp_); }

} // namespace npf
