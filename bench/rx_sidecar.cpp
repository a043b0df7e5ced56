// npf-sidecar: the npf contender's application loop on an npf::Client served
// by a real npfd, which the contender starts for the run. What differs from
// "npf" is only the process boundary: the dataplane (XDP, AF_XDP workers,
// pager) runs in npfd; the bench keeps the region (its memfd, registered with
// its userfaultfd and handed over), posts into the flow's ring map and polls
// the flow's completion ring, both shared memory. release() and populate()
// are requests on npfd's socket. npf-sidecar-2m: the same with a 2 MiB
// (hugetlbfs) region, whose pages a thread of the bench's (npf-install)
// installs from npfd's images.
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
#include "programs.h"
#include "receiver.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/log.h"
#include "sys/thread.h"

#ifndef NPFD_PATH
#define NPFD_PATH ""
#endif

namespace npf::bench {
namespace {

constexpr std::chrono::seconds kReadyDeadline{15};
constexpr std::chrono::seconds kStopDeadline{5};
constexpr int kReadyFd = 3; // npfd's --ready-fd in the child

// The npfd binary: --npfd, else NPFD_PATH (the build tree's, from CMake) if
// it exists, else the one next to npf-bench.
std::string npfdBinary(const std::string& given)
{
    return given.empty() ? programPath(NPFD_PATH, "npfd") : given;
}

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

// npfd as a child process of the bench, serving cfg.ifname with the npf
// contender's XDP mode, queues and pager mode. It runs in the network
// namespace of the thread that constructs it (fork copies the calling
// thread's; makeReceiver runs in the rx one), dies with that thread
// (PR_SET_PDEATHSIG) and is in a process group of its own (a ^C reaches the
// bench, which stops npfd in order). Ready once npfd wrote "ready\n" to its
// --ready-fd; destruction sends SIGTERM (npfd withdraws its flows and
// detaches the program it attached) and SIGKILL after a deadline.
class NpfdProcess {
public:
    NpfdProcess(const RxConfig& cfg, const std::string& dir, bool ownMapping)
        : ifname_(cfg.ifname), binary_(npfdBinary(cfg.npfd)), socket_(dir + "/npfd.sock"), log_(dir + "/npfd.log")
    {
        const std::string config = dir + "/npfd.json";
        {
            nlohmann::json c{{"ifaces", {cfg.ifname}},
                             {"socket", socket_},
                             {"spill_dir", "/var/tmp"},
                             {"clients", nlohmann::json::array()}};
            if (ownMapping)
                c["client_install_wait_us"] = 0;
            std::ofstream f(config);
            f << c.dump(2) << "\n";
            if (!f)
                throwErrno(EIO, "write npfd's config " + config);
        }
        std::vector<std::string> args = {binary_, "-c", config, "--mode", "native", "--queues",
                                         std::to_string(cfg.queues), "--ready-fd", std::to_string(kReadyFd)};
        if (cfg.pagerBusyPoll)
            args.push_back("--pager-busy-poll");
        if (cfg.pagers > 1)
            args.insert(args.end(), {"--pagers", std::to_string(cfg.pagers)});
        if (cfg.verbose)
            args.push_back("-v");
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);

        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0)
            throwErrno("ready pipe for npfd");
        Fd readEnd(p[0]), writeEnd(aboveStdio(Fd(p[1])));
        Fd logFd(aboveStdio(Fd(::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644))));
        Fd null(aboveStdio(Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC))));
        if (!writeEnd || !logFd || !null)
            throwErrno("open " + log_ + ", /dev/null and a pipe for npfd");
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ < 0)
            throwErrno("fork for npfd");
        if (pid_ == 0) {
            // Async-signal-safe calls only until exec.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent)
                ::_exit(127);
            ::setpgid(0, 0);
            if (::dup2(null.get(), STDIN_FILENO) < 0 || ::dup2(logFd.get(), STDOUT_FILENO) < 0 ||
                ::dup2(logFd.get(), STDERR_FILENO) < 0)
                ::_exit(127);
            if (::dup2(writeEnd.get(), kReadyFd) < 0) // the copy is not close-on-exec
                ::_exit(127);
            ::execv(argv[0], argv.data());
            static constexpr char kFailed[] = "npf-bench: exec npfd failed\n";
            (void)!::write(STDERR_FILENO, kFailed, sizeof(kFailed) - 1);
            ::_exit(127);
        }
        writeEnd.reset();
        try {
            awaitReady(readEnd.get());
        } catch (...) {
            stop();
            throw;
        }
    }
    ~NpfdProcess() { stop(); }
    NpfdProcess(const NpfdProcess&) = delete;
    NpfdProcess& operator=(const NpfdProcess&) = delete;

    pid_t pid() const noexcept { return pid_; }
    const std::string& socket() const noexcept { return socket_; }
    const std::string& binary() const noexcept { return binary_; }

    // User + system CPU of all of npfd's threads so far.
    double cpuSeconds() const
    {
        std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
        std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        const size_t close = s.rfind(')'); // comm may hold spaces
        if (close == std::string::npos)
            return 0;
        std::istringstream in(s.substr(close + 2));
        std::string field;
        unsigned long long utime = 0, stime = 0;
        for (int i = 3; i <= 15 && in >> field; i++) { // fields 14 and 15: utime, stime (clock ticks)
            if (i == 14)
                utime = std::stoull(field);
            if (i == 15)
                stime = std::stoull(field);
        }
        return double(utime + stime) / double(::sysconf(_SC_CLK_TCK));
    }

    // The npf contender's CPU placement: worker q on cpus[q % n], pager k
    // on cpus[(n - 1 + k) % n]; npfd's other threads (control, grace periods) are left
    // to the scheduler, as the bench's own are. npfd names its threads when
    // they start: retried until every one is found.
    void pinThreads(const RxConfig& cfg) const
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        const std::string task = "/proc/" + std::to_string(pid_) + "/task";
        for (;;) {
            uint32_t workers = 0, pagers = 0;
            std::error_code ec;
            for (const auto& e : std::filesystem::directory_iterator(task, ec)) {
                std::string comm = readFile(e.path().string() + "/comm");
                while (!comm.empty() && comm.back() == '\n')
                    comm.pop_back();
                int cpu = -1;
                if (comm.rfind("npf-worker-", 0) == 0) {
                    cpu = cfg.cpus[std::stoul(comm.substr(11)) % cfg.cpus.size()];
                    workers++;
                } else if (comm.rfind("npf-pager", 0) == 0) {
                    const size_t k = comm.size() > 9 ? std::stoul(comm.substr(9)) : 0;
                    cpu = cfg.cpus[(cfg.cpus.size() - 1 + k) % cfg.cpus.size()];
                    pagers++;
                }
                if (cpu < 0)
                    continue;
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                if (::sched_setaffinity(std::stoi(e.path().filename().string()), sizeof(set), &set) != 0)
                    NPF_WARN("npf-bench: pinning npfd's %s to CPU %d: %s", comm.c_str(), cpu, strerror(errno));
            }
            if ((workers >= cfg.queues && pagers >= cfg.pagers) || std::chrono::steady_clock::now() > deadline) {
                if (workers < cfg.queues || pagers < cfg.pagers)
                    NPF_WARN("npf-bench: pinned %u of %u npfd workers and %u pager(s): the rest is unpinned",
                             workers, cfg.queues, pagers);
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

private:
    // The same file on a descriptor above kReadyFd (close-on-exec), so that
    // none is overwritten while the child lays out 0, 1, 2 and kReadyFd.
    static Fd aboveStdio(Fd fd) noexcept
    {
        return fd ? Fd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, kReadyFd + 1)) : Fd();
    }

    void awaitReady(int fd)
    {
        const auto end = std::chrono::steady_clock::now() + kReadyDeadline;
        std::string got;
        while (got.find("ready\n") == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                throwErrno(ETIMEDOUT, "npfd on " + ifname_ + " not ready after " +
                                          std::to_string(kReadyDeadline.count()) + " s; its log:\n" + readFile(log_));
            pollfd p{fd, POLLIN, 0};
            const int r = ::poll(&p, 1, int(left.count()));
            if (r < 0 && errno != EINTR)
                throwErrno("poll npfd's ready pipe");
            if (r <= 0)
                continue;
            char buf[64];
            const ssize_t n = ::read(fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                int status = 0;
                ::waitpid(pid_, &status, 0);
                pid_ = -1;
                throwErrno(ECHILD, "npfd on " + ifname_ + " exited before it was ready (" + describe(status) +
                                       "); its log:\n" + readFile(log_));
            }
            got.append(buf, size_t(n));
        }
    }

    static std::string describe(int status)
    {
        if (WIFEXITED(status))
            return "exit code " + std::to_string(WEXITSTATUS(status));
        if (WIFSIGNALED(status))
            return std::string("killed by ") + strsignal(WTERMSIG(status));
        return "status " + std::to_string(status);
    }

    void stop() noexcept
    {
        if (pid_ <= 0)
            return;
        ::kill(pid_, SIGTERM);
        const auto end = std::chrono::steady_clock::now() + kStopDeadline;
        int status = 0;
        pid_t r;
        while ((r = ::waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (r == 0) {
            NPF_WARN("npf-bench: npfd (pid %d) still running %lld s after SIGTERM: SIGKILL; its log:\n%s", pid_,
                     static_cast<long long>(kStopDeadline.count()), readFile(log_).c_str());
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            try {
                dataplane::detach(ifname_); // a killed npfd leaves the program it attached
            } catch (const std::exception& e) {
                NPF_WARN("npf-bench: detach npf_xdp from %s after npfd was killed: %s", ifname_.c_str(), e.what());
            }
        } else if (r == pid_ && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            NPF_WARN("npf-bench: npfd on %s ended with %s; its log:\n%s", ifname_.c_str(), describe(status).c_str(),
                     readFile(log_).c_str());
        }
        pid_ = -1;
    }

    std::string ifname_, binary_, socket_, log_;
    pid_t pid_ = -1;
};

class SidecarReceiver final : public Receiver {
public:
    SidecarReceiver(const RxConfig& cfg, bool ownMapping, uint64_t pageSize)
        : cfg_(cfg),
          // npf-sidecar-2m: the budget plus a few for installs in flight and npfd's fallbacks.
          hugePages_(pageSize == NPF_PAGE_SIZE ? nullptr : reserveHugePages("npf-sidecar-2m", cfg, 4)),
          npfd_(cfg, dir_.path(), ownMapping),
          cli_(ClientConfig{.socket = npfd_.socket(),
                            .regionSize = cfg.regionSize,
                            .pageSize = pageSize,
                            .residentBudget = cfg.budget,
                            .name = "npf-bench"})
    {
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
        const std::string path = counters::engineStatsPath(cfg_.ifname);
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
        snap["npfd"] = {{"binary", npfd_.binary()}, {"pid", npfd_.pid()}, {"dir", dir_.path()}, {"cpuSeconds", npfdCpu_}};
        // release() is a request to npfd and its reply: the one round trip the loop makes.
        snap["releases"] = {{"calls", releases_}, {"seconds", double(releaseNs_) * 1e-9}};
        details_ = nlohmann::json::parse(snap.dump());
        final_ = true;
    }
    uint64_t pinnedBytes() const override { return pinned_; }
    uint64_t residentBytes() const override { return resident_; }
    nlohmann::json details() const override { return details_; }
    std::string route() const override { return details_.value("route", "client-memfd"); }
    double helperCpuSeconds() const override { return final_ ? npfdCpu_ : npfd_.cpuSeconds(); }

private:
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
    std::unique_ptr<topology::HugePages> hugePages_; // npf-sidecar-2m: given back after npfd and the client
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

std::unique_ptr<Receiver> makeSidecarReceiver(const RxConfig& cfg, bool ownMapping, uint64_t pageSize)
{
    return std::make_unique<SidecarReceiver>(cfg, ownMapping, pageSize);
}

} // namespace npf::bench
