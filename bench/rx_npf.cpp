// npf contenders: npf::Engine with FaultPolicy Backup (prefetch on / off,
// 4 KiB or 2 MiB pages), Drop ("drop on fault": a NIC without NPF) and Block
// (the worker takes the fault). The app thread keeps the flow's post ring full, verifies every
// completed payload in the region and reposts the slot.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include "sys/thread.h"
#include "npf/engine.h"
#include "flow_loop.h"
#include "huge_pages.h"
#include "receiver.h"
#include "sys/log.h"
#include "dataplane/stats.h"

namespace npf::bench {
namespace {

class NpfReceiver final : public Receiver {
public:
    NpfReceiver(const std::string& contender, const RxConfig& cfg) : cfg_(cfg)
    {
        // npf-rtc, npf-2m-rtc: npf, npf-2m run to completion (the app's wait() runs the fast path).
        const bool rtc = contender.ends_with("-rtc");
        const std::string kind = rtc ? contender.substr(0, contender.size() - 4) : contender;
        EngineConfig ec = npfEngineConfig(kind, cfg);
        ec.runToCompletion = rtc;
        if (kind == "npf-2m-hugetlbfs") // 2 MiB pages from the huge page pool: the budget plus a batch
            pool_ = reserveHugePages(kind, cfg, 2, &warmSeconds_);
        eng_ = std::make_unique<Engine>(ec);
        Flow& flow = eng_->openFlow(cfg.port, cfg.addr);
        if (!cfg.cold)
            eng_->populate(0, cfg.regionSize);
        loop_.emplace(cfg_, flow, eng_->region(), [this](uint64_t off, uint64_t len) { eng_->release(off, len); });
        loop_->postInitial();
    }
    ~NpfReceiver() override { stop(); }

    void start(std::vector<Meter*> meters) override
    {
        thread_ = std::thread([this, m = meters[0]] {
            pthread_setname_np(pthread_self(), "npf-bench-app");
            npf::pinThread(cfg_.cpus.front(), "npf-bench application"); // with the first worker; the pager gets cpus.back()
            loop(*m);
        });
    }
    void stop() override
    {
        stop_.store(true);
        if (thread_.joinable())
            thread_.join();
    }
    uint64_t pinnedBytes() const override { return eng_->stats().pinnedBytes; }
    uint64_t residentBytes() const override { return eng_->stats().residentPages * NPF_PAGE_SIZE; }
    std::string route() const override { return nlohmann::json::parse(eng_->statsJson()).value("route", ""); }
    // The engine's own stats JSON (what `npfctl stats` shows): counters and
    // per-stage latency quantiles, snake_case names.
    nlohmann::json details() const override
    {
        nlohmann::json d = nlohmann::json::parse(eng_->statsJson());
        if (pool_)
            d["hugePoolWarmSeconds"] = warmSeconds_;
        // XDP's outcome counters on the receiving interface (a fresh veth per run).
        const auto xdp = eng_->xdpCounters();
        for (size_t i = 0; i < xdp.size(); i++)
            d["xdp"][dataplane::kStatNames[i]] = xdp[i];
        return d;
    }

private:
    void loop(Meter& m) noexcept
    {
        while (!stop_.load(std::memory_order_relaxed))
            loop_->step(m);
    }

    RxConfig cfg_;
    std::unique_ptr<topology::HugePages> pool_; // npf-2m-hugetlbfs: before the engine, given back after it
    double warmSeconds_ = 0;
    std::unique_ptr<Engine> eng_;
    std::optional<FlowLoop> loop_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
};

} // namespace

EngineConfig npfEngineConfig(const std::string& kind, const RxConfig& cfg)
{
    EngineConfig ec{.ifname = cfg.ifname,
                    .mode = XdpMode::Native,
                    .queues = cfg.queues,
                    .regionSize = cfg.regionSize,
                    .residentBudget = cfg.budget,
                    .prefetchDepth = cfg.prefetch,
                    .frameSize = cfg.frameSize,
                    .frameCount = cfg.frameCount,
                    .pagerThreads = cfg.pagers,
                    .pagerBusyPoll = cfg.pagerBusyPoll,
                    .statsPath = "/tmp/npf-bench-" + std::to_string(getpid()) + ".json"};
    if (kind == "npf-memfd") {
        ec.regionMemory = RegionMemory::Memfd; // shmem: a page per install, punched out
    } else if (kind == "npf-pool") {
        ec.regionMemory = RegionMemory::PagePool; // 4 KiB pages moved in from a pool and back
    } else if (kind == "npf-2m") {
        ec.pageSize = 2ull << 20; // transparent huge pages from the region's page pool
        ec.regionMemory = RegionMemory::PagePool;
    } else if (kind == "npf-2m-hugetlbfs") {
        ec.pageSize = 2ull << 20;
        ec.regionMemory = RegionMemory::Memfd;
    } else if (kind == "npf-reserve") {
        // The default route with its pages reserved before the window
        // (npf-recv --reserve): the budget, else the region, at most 1 GiB.
        ec.reserve = std::min<uint64_t>(cfg.budget ? cfg.budget : cfg.regionSize, 1ull << 30);
    } else if (kind == "npf-noprefetch") {
        ec.prefetchDepth = 0;
    } else if (kind == "drop-on-fault") {
        ec.faultPolicy = FaultPolicy::Drop;
        ec.prefetchDepth = 0; // a NIC without NPF does not know what comes next either
    } else if (kind == "blocking") {
        ec.faultPolicy = FaultPolicy::Block;
        ec.prefetchDepth = 0;
    }
    for (uint32_t q = 0; q < cfg.queues; q++)
        ec.workerCpus.push_back(cfg.cpus[q % cfg.cpus.size()]);
    for (uint32_t k = 0; k < cfg.pagers; k++)
        ec.pagerCpus.push_back(cfg.cpus[(cfg.cpus.size() - 1 + k) % cfg.cpus.size()]);
    return ec;
}

std::unique_ptr<topology::HugePages> reserveHugePages(const std::string& kind, const RxConfig& cfg, uint64_t spare,
                                                      double* warmSeconds)
{
    constexpr uint64_t kHuge = 2ull << 20;
    auto pool = std::make_unique<topology::HugePages>(cfg.budget ? cfg.budget / kHuge + spare : cfg.regionSize / kHuge);
    if (!pool->ok())
        throw std::runtime_error(kind + ": " + pool->why());
    const double took = pool->warm();
    if (warmSeconds)
        *warmSeconds = took;
    return pool;
}

std::unique_ptr<Receiver> makeNpfReceiver(const std::string& kind, const RxConfig& cfg)
{
    return std::make_unique<NpfReceiver>(kind, cfg);
}

const std::vector<std::string>& receiverKinds()
{
    static const std::vector<std::string> k{"npf",           "npf-reserve",     "npf-pool",        "npf-memfd",       "npf-2m",         "npf-2m-hugetlbfs",
                                            "npf-rtc",       "npf-2m-rtc",      "npf-sidecar",    "npf-sidecar-2m",
                                            "npf-sidecar-brokered", "npf-sidecar-brokered-2m", "npf-sidecar-own",
                                            "npf-noprefetch", "drop-on-fault",  "blocking",
                                            "xdp-drop",      "static-pinned",   "recvmmsg",       "io_uring"};
    return k;
}

std::unique_ptr<Receiver> makeReceiver(const std::string& kind, const RxConfig& cfg)
{
    if (kind == "npf" || kind == "npf-reserve" || kind == "npf-pool" || kind == "npf-memfd" || kind == "npf-2m" || kind == "npf-2m-hugetlbfs" || kind == "npf-rtc" ||
        kind == "npf-2m-rtc" || kind == "npf-noprefetch" || kind == "drop-on-fault" || kind == "blocking")
        return makeNpfReceiver(kind, cfg);
    if (kind.starts_with("npf-sidecar"))
        return makeSidecarReceiver(kind, cfg);
    if (kind == "xdp-drop")
        return makeXskReceiver(false, cfg);
    if (kind == "static-pinned")
        return makeXskReceiver(true, cfg);
    if (kind == "recvmmsg")
        return makeRecvmmsgReceiver(cfg);
    if (kind == "io_uring")
        return makeIoUringReceiver(cfg);
    throw std::invalid_argument("unknown contender '" + kind + "'");
}

uint64_t residentOf(const void* p, uint64_t len)
{
    const uint64_t pages = (len + 4095) / 4096;
    std::vector<unsigned char> v(pages);
    if (::mincore(const_cast<void*>(p), len, v.data()) < 0)
        return 0;
    uint64_t n = 0;
    for (unsigned char c : v)
        n += c & 1;
    return n * 4096;
}

} // namespace npf::bench
