// The npf contender's application loop on an npf::Client served by a real
// npfd, which the contender starts for the run.
//  npf-sidecar, npf-sidecar-2m: delegated mode. npfd attaches the program and
//    hands over the sockets; the bench's Client runs the engine npf (npf-2m)
//    runs, on them: only the privileged set-up is npfd's.
//  npf-sidecar-brokered, -brokered-2m, -own: brokered mode. The dataplane
//    (XDP, AF_XDP workers, pager) runs in npfd; the bench keeps the region (its
//    memfd, registered with its userfaultfd and handed over), posts into the
//    flow's ring map and polls the flow's completion ring, both shared memory.
//    release() and populate() are requests on npfd's socket. -2m: a 2 MiB
//    (hugetlbfs) region, whose pages a thread of the bench's (npf-install)
//    installs from npfd's images; -own: npfd installs into its own mapping.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "counters/engine_stats.h"
#include "dataplane/attach.h"
#include "flow_loop.h"
#include "huge_pages.h"
#include "npf/client.h"
#include "npfd_process.h"
#include "programs.h"
#include "receiver.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/log.h"
#include "sys/thread.h"

namespace npf::bench {
namespace {

// A fresh directory under /tmp, removed with its content.
class TempDir {
public:
    TempDir()
    {
        char tmpl[] = "/tmp/npf-bench-sidecar-XXXXXX";
        if (!::mkdtemp(tmpl))
            throwErrno("mkdtemp /tmp/npf-bench-sidecar-XXXXXX");
        path_ = tmpl;
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
};

class SidecarReceiver final : public Receiver {
public:
    SidecarReceiver(const std::string& kind, const RxConfig& cfg)
        : cfg_(cfg), delegated_(!kind.ends_with("-own") && kind.find("-brokered") == std::string::npos),
          // npf-sidecar-brokered-2m: the budget plus a few for installs in flight and npfd's fallbacks.
          hugePages_(kind == "npf-sidecar-brokered-2m" ? reserveHugePages(kind, cfg, 4) : nullptr),
          npfd_(cfg, dir_.path(), kind.ends_with("-own"), delegated_), cli_(clientConfig(kind))
    {
        if (delegated_ != (cli_.mode() == ClientMode::Delegated))
            throw std::runtime_error(kind + ": npfd gave the client " + toString(cli_.mode()) + " mode");
        if (!delegated_) // else the engine pins its threads (npfEngineConfig's CPUs)
            npfd_.pinThreads(cfg);
        flow_ = &cli_.openFlow(cfg.port, cfg.addr, cfg.ifname);
        if (!cfg.cold)
            cli_.populate(0, cfg.regionSize);
        loop_.emplace(cfg_, *flow_, cli_.region(), [this](uint64_t off, uint64_t len) {
            const uint64_t t0 = monotonicNs();
            cli_.release(off, len);
            releases_++;
            releaseNs_ += monotonicNs() - t0;
        });
        loop_->postInitial();
    }
    ~SidecarReceiver() override { stop(); }

    void start(std::vector<Meter*> meters) override
    {
        thread_ = std::thread([this, m = meters[0]] {
            pthread_setname_np(pthread_self(), "npf-bench-app");
            npf::pinThread(cfg_.cpus.front(), "npf-bench application"); // with npfd's first worker, as for npf
            loop(*m);
        });
    }

    // Ends the app loop and takes the final numbers: npfd's CPU at once, then
    // its stats snapshot (written every 500 ms) from after this moment.
    void stop() override
    {
        stop_.store(true);
        if (thread_.joinable())
            thread_.join();
        if (final_)
            return;
        const uint64_t stoppedNs = monotonicNs();
        npfdCpu_ = npfd_.cpuSeconds();
        counters::Json snap;
        // The engine's snapshot: npfd's (brokered), the bench's own (delegated).
        const std::string path = delegated_ ? statsPath_ : counters::engineStatsPath(cfg_.ifname);
        for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
             std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
            std::ifstream in(path);
            snap = counters::Json::parse(in, nullptr, /*allow_exceptions=*/false);
            if (snap.is_object() && snap.value("time_ns", uint64_t(0)) >= stoppedNs)
                break;
        }
        if (!snap.is_object() || snap.value("time_ns", uint64_t(0)) < stoppedNs)
            NPF_WARN("npf-bench: no fresh npfd stats snapshot in %s: its counters are from before the end", path.c_str());
        if (!snap.is_object())
            snap = counters::Json::object();
        const EngineStats svc = counters::parseEngineStats(snap);
        EngineStats own;
        try {
            own = cli_.stats();
        } catch (const std::exception& e) {
            NPF_WARN("npf-bench: stats of the npfd client: %s", e.what());
        }
        pinned_ = svc.pinnedBytes;
        resident_ = own.residentPages * NPF_PAGE_SIZE;
        // npfd's dataplane counters (one client: all of them are the bench's),
        // as the npf contender reports its engine's; then the client's own.
        snap["client"] = counters::engineStatsJson(own, cfg_.ifname, ::getpid(), stoppedNs);
        snap["npfd"] = {{"binary", npfd_.binary()},
                        {"pid", npfd_.pid()},
                        {"dir", dir_.path()},
                        {"cpuSeconds", npfdCpu_},
                        {"mode", toString(cli_.mode())}};
        // release() is a request to npfd and its reply: the one round trip the loop makes.
        snap["releases"] = {{"calls", releases_}, {"seconds", double(releaseNs_) * 1e-9}};
        details_ = nlohmann::json::parse(snap.dump());
        final_ = true;
    }
    uint64_t pinnedBytes() const override { return pinned_; }
    uint64_t residentBytes() const override { return resident_; }
    // Delegated: the engine's numbers now (the window's start), as npf's.
    nlohmann::json details() const override
    {
        return final_ || !delegated_ ? details_ : nlohmann::json::parse(cli_.statsJson());
    }
    std::string route() const override { return details_.value("route", "client-memfd"); }
    double helperCpuSeconds() const override { return final_ ? npfdCpu_ : npfd_.cpuSeconds(); }

private:
    ClientConfig clientConfig(const std::string& kind)
    {
        ClientConfig c{.socket = npfd_.socket(),
                       .mode = delegated_ ? ClientMode::Delegated : ClientMode::Brokered,
                       .regionSize = cfg_.regionSize,
                       .pageSize = kind.ends_with("-2m") ? 2ull << 20 : NPF_PAGE_SIZE,
                       .residentBudget = cfg_.budget,
                       .name = "npf-bench"};
        if (delegated_) {
            c.engine = npfEngineConfig(kind == "npf-sidecar-2m" ? "npf-2m" : "npf", cfg_);
            statsPath_ = c.engine.statsPath;
        }
        return c;
    }

    // The npf contender's loop (flow_loop.h), on the client's flow and region.
    void loop(Meter& m) noexcept
    {
        while (!stop_.load(std::memory_order_relaxed)) {
            if (loop_->step(m))
                continue;
            if (std::string why = flow_->failure(); !why.empty()) {
                NPF_WARN_RL("npf-bench: npf-sidecar: %s", why.c_str());
                std::this_thread::sleep_for(std::chrono::milliseconds(10)); // wait() returns at once now
            }
        }
    }

    // Teardown order: the app thread (stop()), the client (bye: npfd closes
    // its flows), npfd, the directory of its config, socket and log.
    RxConfig cfg_;
    const bool delegated_;
    std::string statsPath_; // delegated: the bench's engine's snapshot
    std::unique_ptr<topology::HugePages> hugePages_; // npf-sidecar-brokered-2m: given back after npfd and the client
    TempDir dir_;
    NpfdProcess npfd_;
    Client cli_;
    Flow* flow_ = nullptr;
    std::optional<FlowLoop> loop_;
    uint64_t releases_ = 0, releaseNs_ = 0; // app thread only; read after it joined
    std::thread thread_;
    std::atomic<bool> stop_{false};
    bool final_ = false;
    double npfdCpu_ = 0;
    uint64_t pinned_ = 0, resident_ = 0;
    nlohmann::json details_;
};

} // namespace

std::unique_ptr<Receiver> makeSidecarReceiver(const std::string& kind, const RxConfig& cfg)
{
    return std::make_unique<SidecarReceiver>(kind, cfg);
}

} // namespace npf::bench
