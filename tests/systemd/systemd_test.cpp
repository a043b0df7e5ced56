// deploy/systemd/npfd.service and npfd's sd_notify: the unit passes
// `systemd-analyze verify`, and the real npfd, in a fresh namespace on a veth
// pair, notifies a socket of the test's own the way systemd's Type=notify
// expects: READY=1 with STATUS after its ready line, from its main pid,
// STOPPING=1 on SIGTERM, then exit 0; and it does so with only the unit's
// CapabilityBoundingSet, detaching the program it attached.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "netns.h"
#include "wait.h"

namespace {

using npf::test::kDeadline;

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A fresh directory under /tmp, removed with its content.
struct TempDir {
    TempDir()
    {
        char tmpl[] = "/tmp/npf-systemd-XXXXXX";
        if (!::mkdtemp(tmpl))
            throw std::system_error(errno, std::generic_category(), "mkdtemp");
        path = tmpl;
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string path;
};

// The unit with ExecStart's binary replaced by the built npfd.
std::string unitFor(const std::string& npfd)
{
    std::string unit = readFile(NPFD_UNIT_PATH);
    const std::string installed = "/usr/local/sbin/npfd";
    const size_t at = unit.find("ExecStart=" + installed);
    if (at == std::string::npos)
        return "";
    return unit.replace(at + std::string("ExecStart=").size(), installed.size(), npfd);
}

// The unit's CapabilityBoundingSet= as setpriv's --bounding-set argument
// ("-all,+bpf,+perfmon,..."); "" if the unit has none.
std::string boundingSetForSetpriv()
{
    std::istringstream in(readFile(NPFD_UNIT_PATH));
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("CapabilityBoundingSet=", 0) != 0)
            continue;
        std::istringstream caps(line.substr(line.find('=') + 1));
        std::string arg = "-all";
        for (std::string cap; caps >> cap;) {
            std::string name = cap.rfind("CAP_", 0) == 0 ? cap.substr(4) : cap;
            for (char& c : name)
                c = char(std::tolower(static_cast<unsigned char>(c)));
            arg += ",+" + name;
        }
        return arg;
    }
    return "";
}

// A NOTIFY_SOCKET: an AF_UNIX datagram socket that receives the sender's
// credentials with every message (systemd checks NotifyAccess=main by them).
class NotifySocket {
public:
    explicit NotifySocket(const std::string& path) : path_(path)
    {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0)
            throw std::system_error(errno, std::generic_category(), "socket(AF_UNIX, SOCK_DGRAM)");
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
        const int on = 1;
        if (::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0 ||
            ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
            throw std::system_error(errno, std::generic_category(), "bind " + path);
    }
    ~NotifySocket() { ::close(fd_); }
    NotifySocket(const NotifySocket&) = delete;
    NotifySocket& operator=(const NotifySocket&) = delete;

    const std::string& path() const { return path_; }
    // The next message and its sender's pid; false if none came within `deadline`.
    bool next(std::string* msg, pid_t* sender, std::chrono::milliseconds deadline = kDeadline)
    {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, int(deadline.count())) != 1)
            return false;
        char buf[4096];
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
        iovec iov{buf, sizeof(buf)};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control;
        m.msg_controllen = sizeof(control);
        const ssize_t n = ::recvmsg(fd_, &m, MSG_DONTWAIT);
        if (n < 0)
            return false;
        msg->assign(buf, size_t(n));
        *sender = -1;
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
                *sender = reinterpret_cast<ucred*>(CMSG_DATA(c))->pid;
        return true;
    }

private:
    std::string path_;
    int fd_ = -1;
};

// npfd in a network namespace (nsenter execs it: the pid is npfd's), with
// NOTIFY_SOCKET set, stdout to a pipe, stderr to a file. Killed and reaped if
// the test leaves it running.
class Npfd {
public:
    Npfd(const std::string& netns, const std::vector<std::string>& prefix, const std::string& config,
         const std::string& notifySocket, const std::string& log)
        : log_(log)
    {
        // nsenter first: entering the namespace needs CAP_SYS_ADMIN whatever `prefix` drops.
        std::vector<std::string> args = {"nsenter", "--net=" + netns};
        args.insert(args.end(), prefix.begin(), prefix.end());
        args.insert(args.end(), {NPFD_PATH, "--config", config, "--foreground"});
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        int out[2];
        if (::pipe2(out, O_CLOEXEC) != 0)
            throw std::system_error(errno, std::generic_category(), "pipe for npfd's stdout");
        const std::string env = "NOTIFY_SOCKET=" + notifySocket;
        pid_ = ::fork();
        if (pid_ < 0)
            throw std::system_error(errno, std::generic_category(), "fork for npfd");
        if (pid_ == 0) {
            const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int null = ::open("/dev/null", O_RDONLY);
            if (err < 0 || null < 0 || ::dup2(null, STDIN_FILENO) < 0 || ::dup2(out[1], STDOUT_FILENO) < 0 ||
                ::dup2(err, STDERR_FILENO) < 0 || ::putenv(const_cast<char*>(env.c_str())) != 0)
                ::_exit(127);
            ::execvp(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(out[1]);
        out_ = out[0];
        pidfd_ = int(::syscall(SYS_pidfd_open, pid_, 0));
        if (pidfd_ < 0)
            throw std::system_error(errno, std::generic_category(), "pidfd_open for npfd");
    }
    ~Npfd()
    {
        if (!reaped_) {
            ::kill(pid_, SIGKILL);
            int st;
            (void)::waitpid(pid_, &st, 0);
        }
        ::close(out_);
        ::close(pidfd_);
    }
    Npfd(const Npfd&) = delete;
    Npfd& operator=(const Npfd&) = delete;

    pid_t pid() const { return pid_; }
    void kill(int sig) { ::kill(pid_, sig); }
    std::string log() const { return readFile(log_); }
    // What npfd wrote to stdout so far (does not block).
    std::string stdoutSoFar()
    {
        for (;;) {
            pollfd p{out_, POLLIN, 0};
            if (::poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
                return out_text_;
            char buf[512];
            const ssize_t n = ::read(out_, buf, sizeof(buf));
            if (n <= 0)
                return out_text_;
            out_text_.append(buf, size_t(n));
        }
    }
    // Waits for exit (the pidfd turns readable); its exit code, 128+signal, or -1 at the deadline.
    int wait(std::chrono::milliseconds deadline = kDeadline)
    {
        pollfd p{pidfd_, POLLIN, 0};
        if (::poll(&p, 1, int(deadline.count())) != 1)
            return -1;
        int st = 0;
        if (::waitpid(pid_, &st, 0) != pid_)
            return -1;
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }

private:
    std::string log_, out_text_;
    pid_t pid_ = -1;
    int out_ = -1, pidfd_ = -1;
    bool reaped_ = false;
};

std::string sh(const std::string& cmd, int* status = nullptr) { return npf::test::shOut(cmd, status); }

TEST(SystemdUnit, VerifiesWithSystemdAnalyze)
{
    int st = -1;
    sh("command -v systemd-analyze", &st);
    if (st != 0)
        GTEST_SKIP() << "systemd-analyze not installed (apt install systemd; scripts/deps.sh)";
    TempDir dir;
    // verify checks that ExecStart's binary exists: point it at the built npfd.
    const std::string unit = unitFor(NPFD_PATH);
    ASSERT_FALSE(unit.empty()) << NPFD_UNIT_PATH << " has no ExecStart=/usr/local/sbin/npfd";
    const std::string path = dir.path + "/npfd.service";
    std::ofstream(path) << unit;
    const std::string out = sh("systemd-analyze verify " + path + " 2>&1", &st);
    EXPECT_EQ(st, 0) << out;
    // Lines that name our unit are about it; others are about the host's own
    // units or the absence of a running systemd (say, in a container): shown, not failed.
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        if (line.find("npfd.service") != std::string::npos)
            ADD_FAILURE() << "systemd-analyze verify: " << line;
        else
            std::printf("systemd-analyze verify (environment, not the unit): %s\n", line.c_str());
    }
}

class NpfdNotify : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!npf::test::isRoot())
            GTEST_SKIP() << "needs root (a veth pair in fresh namespaces, XDP, AF_XDP)";
        veth_ = std::make_unique<npf::test::VethPair>();
        dir_ = std::make_unique<TempDir>();
        config_ = dir_->path + "/npfd.json";
        socket_ = dir_->path + "/npfd.sock";
        std::ofstream(config_) << R"({"ifaces": [")" << veth_->rxIf() << R"("], "socket": ")" << socket_
                               << R"(", "spill_dir": "/var/tmp"})";
        notify_ = std::make_unique<NotifySocket>(dir_->path + "/notify.sock");
    }
    void TearDown() override
    {
        if (!veth_)
            return;
        npfd_.reset();
        // A killed npfd leaves the program it attached, and its pins: detach.
        sh(veth_->rxNs().exec() + NPFCTL_PATH + " detach " + veth_->rxIf() + " >/dev/null 2>&1");
        notify_.reset();
        dir_.reset();
        veth_.reset();
    }

    // Starts npfd (under `prefix`, e.g. setpriv) and checks what it tells
    // systemd through a start and a SIGTERM.
    void startNotifyStop(const std::vector<std::string>& prefix)
    {
        npfd_ = std::make_unique<Npfd>(veth_->rxNs().path(), prefix, config_, notify_->path(),
                                       dir_->path + "/npfd.log");
        std::string msg;
        pid_t sender = -1;
        ASSERT_TRUE(notify_->next(&msg, &sender)) << "no READY=1 within " << kDeadline.count()
                                                  << " ms; npfd's stderr:\n" << npfd_->log();
        // READY=1 comes after the ready line: clients may connect from then on.
        const std::string ready = "npfd: serving " + veth_->rxIf() + " on " + socket_ + " (pid " +
                                  std::to_string(npfd_->pid()) + ")\n";
        EXPECT_EQ(npfd_->stdoutSoFar(), ready);
        EXPECT_EQ(msg, "READY=1\nSTATUS=serving " + veth_->rxIf() + " on " + socket_);
        EXPECT_EQ(sender, npfd_->pid()) << "NotifyAccess=main: the message must come from npfd's own pid";
        EXPECT_TRUE(std::filesystem::exists(socket_));

        npfd_->kill(SIGTERM);
        ASSERT_TRUE(notify_->next(&msg, &sender)) << "no STOPPING=1 after SIGTERM; npfd's stderr:\n"
                                                  << npfd_->log();
        EXPECT_EQ(msg, "STOPPING=1");
        EXPECT_EQ(sender, npfd_->pid());
        EXPECT_EQ(npfd_->wait(), 0) << npfd_->log();
        EXPECT_FALSE(notify_->next(&msg, &sender, std::chrono::milliseconds(0))) << "after exit: " << msg;
    }

    // Whether an XDP program is attached to the rx interface (`ip link` says "prog/xdp").
    bool xdpAttached()
    {
        return sh(veth_->rxNs().exec() + "ip -d link show dev " + veth_->rxIf()).find("prog/xdp") !=
               std::string::npos;
    }

    std::unique_ptr<npf::test::VethPair> veth_;
    std::unique_ptr<TempDir> dir_;
    std::string config_, socket_;
    std::unique_ptr<NotifySocket> notify_;
    std::unique_ptr<Npfd> npfd_;
};

TEST_F(NpfdNotify, ReadyAfterTheReadyLineStoppingOnSigterm)
{
    ASSERT_NO_FATAL_FAILURE(startNotifyStop({}));
    EXPECT_FALSE(xdpAttached()) << "npfd attached the program and should have detached it";
}

// The unit's capabilities are enough: npfd as root with exactly that bounding
// set (and no_new_privs) serves, stops and detaches what it attached.
TEST_F(NpfdNotify, WorksWithTheUnitsCapabilitiesOnly)
{
    const std::string caps = boundingSetForSetpriv();
    ASSERT_FALSE(caps.empty()) << NPFD_UNIT_PATH << " has no CapabilityBoundingSet=";
    ASSERT_NO_FATAL_FAILURE(
        startNotifyStop({"setpriv", "--bounding-set=" + caps, "--inh-caps=-all", "--no-new-privs"}));
    EXPECT_FALSE(xdpAttached()) << "npfd attached the program and should have detached it; its stderr:\n"
                                << npfd_->log();
}

} // namespace
