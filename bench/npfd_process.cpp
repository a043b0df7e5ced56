#include "npfd_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/attach.h"
#include "programs.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/log.h"

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

// The same file on a descriptor above kReadyFd (close-on-exec), so that
// none is overwritten while the child lays out 0, 1, 2 and kReadyFd.
Fd aboveStdio(Fd fd) noexcept
{
    return fd ? Fd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, kReadyFd + 1)) : Fd();
}

std::string describe(int status)
{
    if (WIFEXITED(status))
        return "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return std::string("killed by ") + strsignal(WTERMSIG(status));
    return "status " + std::to_string(status);
}

} // namespace

NpfdProcess::NpfdProcess(const RxConfig& cfg, const std::string& dir, bool ownMapping, bool delegate)
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
        if (delegate)
            c["delegate"] = {cfg.ifname};
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

NpfdProcess::~NpfdProcess() { stop(); }

double NpfdProcess::cpuSeconds() const
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

namespace {

// /proc/PID/task/TID (named `comm`) on `cpus`; a failure is only warned of.
void pinTask(const std::filesystem::path& task, const std::string& comm, const std::vector<int>& cpus)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus)
        CPU_SET(c, &set);
    if (::sched_setaffinity(std::stoi(task.filename().string()), sizeof(set), &set) != 0)
        NPF_WARN("npf-bench: pinning npfd's %s to CPU %d%s: %s", comm.c_str(), cpus.front(),
                 cpus.size() > 1 ? " and others" : "", strerror(errno));
}

} // namespace

void NpfdProcess::confine(const std::vector<int>& cpus) const
{
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/task", ec))
        pinTask(e.path(), e.path().filename().string(), cpus);
}

void NpfdProcess::pinThreads(const RxConfig& cfg) const
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
            if (cpu >= 0)
                pinTask(e.path(), comm, {cpu});
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

void NpfdProcess::awaitReady(int fd)
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

void NpfdProcess::stop() noexcept
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

} // namespace npf::bench
