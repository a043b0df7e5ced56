#include "engine/service.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <thread>

#include "counters/engine_stats.h"
#include "engine/local_xdp.h"
#include "region/region.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/netns.h"

namespace npf {
namespace {

// More would only contend for the regions' locks.
constexpr uint32_t kMaxPagers = 64;

} // namespace

Service::Service(const EngineConfig& c, EpochDomain* epochs) : Service(c, nullptr, epochs) {}

Service::Service(const EngineConfig& c, std::unique_ptr<XdpLink> link, EpochDomain* epochs)
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
    link_ = link ? std::move(link) : std::make_unique<LocalXdp>(cfg_);
    try {
        setUp();
    } catch (...) {
        // The destructor does not run for a half-built service: undo the attach here.
        workers_.clear();
        pagers_.clear();
        queues_.clear();
        link_->detach(false);
        throw;
    }
}

void Service::setUp()
{
    flows_ = std::make_unique<FlowTable>(*link_, cfg_);
    flows_->withdrawStale();
    const uint32_t nq = link_->queues();
    const xsk::QueueSizes sizes = link_->sizes();
    for (uint32_t q = 0; q < nq; q++)
        queues_.push_back(link_->openQueue(q, flows_->set()));
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
    credits_.reset();
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
    if (statsPath_ != "-") {
        ::unlink(statsPath_.c_str());
        // /run/npf/netns-<inode>/<ifname>, then the namespace's directory once empty
        const std::string dir = statsPath_.substr(0, statsPath_.rfind('/'));
        ::rmdir(dir.c_str());
        ::rmdir(dir.substr(0, dir.rfind('/')).c_str());
    }
    if (moved)
        link_->detach(ifaceGone_.load(std::memory_order_acquire));
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
                              bool fresh, const CreditConfig& credits)
{
    CreditSetup setup{credits, nullptr};
    if (credits.enabled) {
        if (credits.step == 0)
            throw std::invalid_argument("credits: the step must be at least 1 datagram");
        std::lock_guard<std::mutex> lock(creditMu_);
        if (!credits_)
            credits_ = std::make_unique<CreditSender>(*flows_, netns_.get(), cfg_.ifname, epochs_);
        setup.kick = credits_->kick();
    }
    return flows_->open(spec, region, binding, fresh, setup);
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
    return link_->lost(true);
}

std::array<uint64_t, NPF_STAT_MAX> Service::xdpCounters() const { return link_->xdpCounters(); }

} // namespace npf
