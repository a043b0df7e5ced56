#include "e2e_rig.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "npf/abi.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

namespace npf::e2e {

std::string describe(const Counters& c)
{
    std::string s;
    for (const auto& [name, v] : c)
        if (v)
            s += name + "=" + std::to_string(v) + " ";
    return s.empty() ? "(all zero)" : s;
}

// What a test (or a killed npf-recv) left is removed by NpfVeth.
Rig::Rig(test::VethOptions opt) : NpfVeth(opt, NPFCTL_PATH)
{
    // IPv6 would add ND/MLD packets of the kernel's own to the counters.
    if (!ipv6Off())
        throw std::runtime_error("disabling IPv6 on " + rxIf() + " and its peer failed");
}

std::string Rig::npfctl(const std::string& args, int* status)
{
    return test::shOut(veth_.rxNs().exec() + NPFCTL_PATH + " " + args + " 2>/dev/null", status);
}

::testing::AssertionResult Rig::npfctlOk(const std::string& args)
{
    int status = -1;
    const std::string out = npfctl(args, &status);
    if (status == 0)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "npfctl " << args << " exited " << status << ": " << out;
}

namespace {
Counters group(const std::string& out, const char* name)
{
    Counters c;
    try {
        nlohmann::json j = nlohmann::json::parse(out);
        if (j.contains("counters") && j["counters"].contains(name))
            for (auto& [k, v] : j["counters"][name].items())
                if (v.is_number())
                    c[k] = v.get<uint64_t>();
    } catch (const nlohmann::json::exception&) {
    }
    return c;
}
} // namespace

Counters Rig::xdp() { return group(npfctl("stats " + rxIf() + " --json"), "xdp"); }
uint64_t Rig::xdpStat(uint32_t stat)
{
    const std::string path = pinDir() + "/npf_stats";
    const int fd = bpf_obj_get(path.c_str());
    if (fd < 0)
        return 0;
    const int cpus = libbpf_num_possible_cpus();
    std::vector<uint64_t> v(cpus > 0 ? size_t(cpus) : 1);
    uint64_t sum = 0;
    if (bpf_map_lookup_elem(fd, &stat, v.data()) == 0)
        for (uint64_t x : v)
            sum += x;
    ::close(fd);
    return sum;
}

Counters Rig::engineSnapshot() { return group(npfctl("stats " + rxIf() + " --json"), "engine"); }
Counters Rig::regionSnapshot() { return group(npfctl("stats " + rxIf() + " --json"), "region"); }

Counters Rig::rxEthtool()
{
    Counters c;
    std::istringstream in(test::shOut(veth_.rxNs().exec() + "ethtool -S " + rxIf()));
    std::string line;
    while (std::getline(in, line)) {
        auto colon = line.find(':');
        if (colon == std::string::npos)
            continue;
        std::string key = line.substr(0, colon);
        key.erase(0, key.find_first_not_of(' '));
        try {
            c[key] = std::stoull(line.substr(colon + 1));
        } catch (const std::exception&) {
        }
    }
    return c;
}

uint64_t Rig::vethDrops()
{
    auto stat = [](test::Netns& ns, const std::string& ifname, const char* dir) -> uint64_t {
        std::string out = test::shOut(ns.exec() + "ip -s -j link show dev " + ifname);
        try {
            return nlohmann::json::parse(out).at(0).at("stats64").at(dir).at("dropped").get<uint64_t>();
        } catch (const nlohmann::json::exception&) {
            return 0;
        }
    };
    return stat(veth_.rxNs(), veth_.rxIf(), "rx") + stat(veth_.txNs(), veth_.txIf(), "tx");
}

std::string Rig::statusJson()
{
    int st = 0;
    std::string out = npfctl("status " + rxIf() + " --json", &st);
    try {
        return st == 0 ? nlohmann::json::parse(out).at(0).dump() : "";
    } catch (const nlohmann::json::exception&) {
        return "";
    }
}

uint8_t payloadByte(uint32_t id, uint32_t size, uint32_t i) noexcept
{
    if (i < 4)
        return static_cast<uint8_t>(id >> (8 * i));
    if (i < kHeader)
        return static_cast<uint8_t>(size >> (8 * (i - 4)));
    uint32_t x = id * 0x9E3779B1u ^ (i * 0x85EBCA77u);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    return static_cast<uint8_t>(x >> 24);
}

std::vector<uint8_t> payloadFor(uint32_t id, uint32_t size)
{
    std::vector<uint8_t> p(size);
    for (uint32_t i = 0; i < size; i++)
        p[i] = payloadByte(id, size, i);
    return p;
}

std::string sendDatagrams(test::VethPair& veth, SendPlan plan)
{
    Sender tx(veth, std::move(plan));
    tx.start();
    tx.join();
    return tx.error();
}

Sender::Sender(test::VethPair& veth, SendPlan plan) : veth_(veth), plan_(plan)
{
    test::NetnsGuard in(veth_.txNs());
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0)
        throw std::system_error(errno, std::generic_category(), "sender socket");
    int buf = 4 << 20;
    (void)setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(plan_.srcPort);
    inet_pton(AF_INET, veth_.txAddr().c_str(), &a.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
        throw std::system_error(errno, std::generic_category(), "bind sender " + veth_.txAddr());
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(plan_.dstPort);
    inet_pton(AF_INET, veth_.rxAddr().c_str(), &d.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&d), sizeof(d)) != 0)
        throw std::system_error(errno, std::generic_category(), "connect sender to " + veth_.rxAddr());
}

Sender::~Sender()
{
    join();
    if (fd_ >= 0)
        ::close(fd_);
}

void Sender::start() { thread_ = std::thread([this] { run(); }); }

void Sender::join()
{
    if (thread_.joinable())
        thread_.join();
}

void Sender::sendOne(uint32_t id, uint32_t size)
{
    std::vector<uint8_t> p = payloadFor(id, size);
    for (;;) {
        if (::send(fd_, p.data(), p.size(), 0) == static_cast<ssize_t>(p.size()))
            return;
        // ECONNREFUSED: an ICMP port unreachable for an earlier datagram (kernel path, nobody bound).
        if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED)
            throw std::system_error(errno, std::generic_category(), "send datagram " + std::to_string(id));
        if (errno != ECONNREFUSED) {
            retries_++;
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
}

// Blocks until datagram k is inside the flow control window.
void Sender::awaitWindow(uint32_t k)
{
    uint64_t done = plan_.done(), seen = done;
    auto progress = std::chrono::steady_clock::now();
    while (k >= plan_.window + done) {
        // Paces the sender; nothing depends on how long it sleeps.
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        done = plan_.done();
        const auto now = std::chrono::steady_clock::now();
        if (done != seen) {
            seen = done;
            progress = now;
        } else if (now - progress > test::kDeadline) {
            throw std::runtime_error("flow control: the receiver has been through with " + std::to_string(done) +
                                     " datagrams for " + std::to_string(test::kDeadline.count()) +
                                     " ms, datagram " + std::to_string(k) + " waits (one sent was never accounted for)");
        }
    }
}

void Sender::run()
{
    try {
        test::NetnsGuard in(veth_.txNs());
        const auto t0 = std::chrono::steady_clock::now();
        for (uint32_t k = 0; k < plan_.count; k++) {
            if (plan_.window)
                awaitWindow(k);
            if (plan_.rate > 0 && (k & 7) == 0) {
                auto due = t0 + std::chrono::nanoseconds(static_cast<int64_t>(k * 1e9 / plan_.rate));
                if (due > std::chrono::steady_clock::now())
                    std::this_thread::sleep_until(due);
            }
            sendOne(senderId(plan_.sender, k), plan_.size(k));
            sent_++;
        }
        seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } catch (const std::exception& e) {
        error_ = e.what();
    }
}

// The child's number for the write end of the ready pipe.
constexpr int kReadyFd = 3;

Child::Child(const std::string& netnsPath, const std::vector<std::string>& argv, const std::string& stderrPath,
             bool readyFd)
    : stderrPath_(stderrPath)
{
    std::vector<std::string> args = {"nsenter", "--net=" + netnsPath};
    args.insert(args.end(), argv.begin(), argv.end());
    int pipeFds[2] = {-1, -1};
    if (readyFd) {
        if (pipe2(pipeFds, O_CLOEXEC) != 0)
            throw std::system_error(errno, std::generic_category(), "ready pipe for " + argv.at(0));
        args.insert(args.end(), {"--ready-fd", std::to_string(kReadyFd)});
    }
    std::vector<char*> cargs;
    for (auto& a : args)
        cargs.push_back(a.data());
    cargs.push_back(nullptr);
    pid_ = fork();
    if (pid_ < 0) {
        const int err = errno;
        for (int fd : pipeFds)
            if (fd >= 0)
                ::close(fd);
        throw std::system_error(err, std::generic_category(), "fork for " + argv.at(0));
    }
    if (pid_ == 0) {
        int err = ::open(stderrPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int null = ::open("/dev/null", O_RDWR);
        if (err >= 0)
            dup2(err, STDERR_FILENO);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
        }
        if (readyFd) {
            // dup2 clears close-on-exec on the copy; a pipe end that is fd 3 already keeps it.
            if (pipeFds[1] == kReadyFd)
                fcntl(kReadyFd, F_SETFD, 0);
            else if (dup2(pipeFds[1], kReadyFd) < 0)
                _exit(127);
        }
        execvp("nsenter", cargs.data());
        _exit(127);
    }
    if (readyFd) {
        ::close(pipeFds[1]); // only the child writes: end of file when it exits
        readyFd_ = pipeFds[0];
    }
}

::testing::AssertionResult Child::ready(std::chrono::milliseconds deadline)
{
    if (readyFd_ < 0)
        return ::testing::AssertionFailure() << "child started without a ready pipe";
    const auto end = std::chrono::steady_clock::now() + deadline;
    std::string got;
    for (;;) {
        if (got.find("ready\n") != std::string::npos)
            return ::testing::AssertionSuccess();
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
        if (left <= 0)
            return ::testing::AssertionFailure() << "not ready after " << deadline.count() << " ms; its stderr:\n"
                                                 << readFile(stderrPath_);
        pollfd p{readyFd_, POLLIN, 0};
        int r = poll(&p, 1, int(left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        char buf[64];
        ssize_t n = ::read(readyFd_, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return ::testing::AssertionFailure() << "exited before it was ready (ready pipe closed"
                                                 << (got.empty() ? "" : " after '" + got + "'") << "); its stderr:\n"
                                                 << readFile(stderrPath_);
        got.append(buf, size_t(n));
    }
}

Child::~Child()
{
    if (readyFd_ >= 0)
        ::close(readyFd_);
    if (!reaped_ && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int st;
        (void)waitpid(pid_, &st, 0);
    }
}

void Child::kill(int sig)
{
    if (!reaped_)
        ::kill(pid_, sig);
}

bool Child::wait(int ms, int* status)
{
    for (int waited = 0;; waited += 10) {
        int st = 0;
        pid_t r = waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            reaped_ = true;
            if (status)
                *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return true;
        }
        if (waited >= ms)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

bool Child::running() { return !reaped_ && !wait(0, nullptr); }

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::function<uint64_t()> datagramsWritten(const std::string& path, uint32_t first, uint32_t (*size)(uint32_t))
{
    struct Progress {
        uint64_t n = 0, bytes = 0; // whole datagrams so far, their bytes
    };
    auto p = std::make_shared<Progress>();
    return [=]() {
        std::error_code ec;
        const uint64_t have = std::filesystem::file_size(path, ec);
        while (!ec && p->bytes + size(first + uint32_t(p->n)) <= have)
            p->bytes += size(first + uint32_t(p->n++));
        return p->n;
    };
}

std::function<uint64_t()> seenByXdp(Rig& rig)
{
    const uint64_t before = rig.xdpStat(NPF_STAT_RX_TOTAL);
    return [&rig, before] { return rig.xdpStat(NPF_STAT_RX_TOTAL) - before; };
}

TempDir::TempDir()
{
    char tmpl[] = "/tmp/npf-e2e-XXXXXX";
    if (!mkdtemp(tmpl))
        throw std::system_error(errno, std::generic_category(), "mkdtemp");
    path = tmpl;
}

TempDir::~TempDir()
{
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

std::string streamBytes(uint32_t sid, uint32_t first, uint32_t n, uint32_t (*size)(uint32_t))
{
    std::string s;
    for (uint32_t k = first; k < first + n; k++) {
        std::vector<uint8_t> p = payloadFor(senderId(sid, k), size(k));
        s.append(p.begin(), p.end());
    }
    return s;
}

KernelSocket::KernelSocket(Rig& rig, uint16_t port)
{
    test::NetnsGuard in(rig.veth().rxNs());
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0)
        throw std::system_error(errno, std::generic_category(), "kernel socket");
    int buf = 16 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, rig.rxAddr().c_str(), &a.sin_addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
        throw std::system_error(errno, std::generic_category(), "bind kernel socket");
}

KernelSocket::~KernelSocket() { close(fd_); }

bool KernelSocket::one(std::vector<std::string>* out, int timeoutMs)
{
    char buf[65536]; // any datagram, jumbo ones too
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeoutMs) <= 0)
        return false;
    ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n >= 0)
        out->emplace_back(buf, size_t(n));
    return true;
}

std::vector<std::string> KernelSocket::drain(std::chrono::milliseconds quiet)
{
    std::vector<std::string> out;
    while (one(&out, int(quiet.count())))
        ;
    return out;
}

void KernelSocket::receive(std::vector<std::string>* out, size_t count, int ms, int quietMs)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (out->size() < count) {
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
        if (left <= 0 || !one(out, int(left)))
            break;
    }
    while (one(out, quietMs))
        ;
}

// Sends a raw Ethernet frame out of the tx end of the veth (from its namespace).
void sendRaw(Rig& rig, const std::vector<uint8_t>& frame)
{
    test::NetnsGuard in(rig.veth().txNs());
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd < 0)
        throw std::system_error(errno, std::generic_category(), "AF_PACKET socket");
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_ifindex = static_cast<int>(if_nametoindex(rig.veth().txIf().c_str()));
    a.sll_halen = 6;
    ssize_t n = sendto(fd, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    int err = errno;
    close(fd);
    if (n != ssize_t(frame.size()))
        throw std::system_error(err, std::generic_category(), "send raw frame on " + rig.veth().txIf());
}

// npf-recv's --json exit summary: the last line of its stderr that is a JSON
// object (null if there is none).
nlohmann::json jsonSummary(const std::string& errPath)
{
    std::istringstream in(readFile(errPath));
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty() && line[0] == '{')
            last = line;
    nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
    return j.is_discarded() ? nlohmann::json() : j;
}

// Datagrams the summary accounts for: written + every reason not written
// (LOST, BAD_CSUM, dropped in XDP, passed to the kernel, in flight, not
// polled, failed to write). It must equal "reached" (the flow's datagrams XDP
// saw); ~0 when the summary does not add up.
uint64_t accountedFor(const nlohmann::json& j)
{
    uint64_t n = j.at("datagrams").get<uint64_t>();
    for (const auto& [reason, v] : j.at("not_written").items())
        n += v.get<uint64_t>();
    return n == j.at("reached").get<uint64_t>() ? n : ~0ull;
}

bool haveTrafgen() { return std::filesystem::exists("/usr/sbin/trafgen"); }

::testing::AssertionResult generatorAccounted(Rig& rig, const TempDir& dir, Child& recv, const std::string& err,
                                              uint16_t port, uint64_t n)
{
    const std::string cfg = dir.path + "/trafgen.cfg", log = dir.path + "/trafgen.log";
    std::ofstream(cfg) << "{ eth(da=" << rig.veth().rxMac() << ", sa=" << rig.veth().txMac() << "), ipv4(saddr="
                       << rig.txAddr() << ", daddr=" << rig.rxAddr() << ", ttl=64), udp(sp=40000, dp=" << port
                       << "), fill(0x41, 1400) }\n";
    const uint64_t veth0 = rig.vethDrops(), seen0 = rig.xdpStat(NPF_STAT_RX_TOTAL);
    {
        Child gen(rig.veth().txNs().path(),
                  {"/usr/sbin/trafgen", "--cpus", "1", "-o", rig.veth().txIf(), "-i", cfg, "-n", std::to_string(n),
                   "-q"},
                  log);
        // How many datagrams the stretch drops depends on timing; that every
        // one is accounted for does not.
        auto seen = [&](uint64_t k) {
            test::waitUntil([&] { return rig.xdpStat(NPF_STAT_RX_TOTAL) - seen0 >= k || !gen.running(); });
        };
        seen(n / 4);
        recv.kill(SIGSTOP);
        seen(n / 2);
        recv.kill(SIGCONT);
        int st = -1;
        if (!gen.wait(int(test::kDeadline.count()), &st) || st != 0)
            return ::testing::AssertionFailure() << "trafgen failed (" << st << "): " << readFile(log);
    }
    int st = -1;
    if (!recv.wait(int(test::kDeadline.count()), &st) || st != 0)
        return ::testing::AssertionFailure() << "npf-recv did not exit 0 on --idle (" << st << "): " << readFile(err);
    const nlohmann::json j = jsonSummary(err);
    if (!j.is_object() || !j["flow"].is_object())
        return ::testing::AssertionFailure() << "no summary with the flow's accounting: " << readFile(err);
    // veth counts a socket drop in the receiver's rx_dropped too: that one is
    // a LOST completion of the flow already.
    const uint64_t veth = rig.vethDrops() - veth0, socket = j["flow"]["socket_dropped"].get<uint64_t>();
    const uint64_t beforeXdp = veth >= socket ? veth - socket : veth;
    std::printf("[ numbers  ] trafgen %llu datagrams: reached %llu, written %llu, dropped in XDP %llu, lost %llu "
                "(socket %llu), before XDP %llu\n",
                (unsigned long long)n, (unsigned long long)j["reached"].get<uint64_t>(),
                (unsigned long long)j["datagrams"].get<uint64_t>(),
                (unsigned long long)j["not_written"]["dropped_in_xdp"].get<uint64_t>(),
                (unsigned long long)j["not_written"]["lost"].get<uint64_t>(), (unsigned long long)socket,
                (unsigned long long)beforeXdp);
    if (accountedFor(j) + beforeXdp != n)
        return ::testing::AssertionFailure() << "the summary accounts for " << accountedFor(j) << " + " << beforeXdp
                                             << " before XDP, not " << n << ":\n" << j.dump(2);
    if (j["not_written"]["in_flight"].get<uint64_t>() != 0 || j["not_written"]["passed"].get<uint64_t>() != 0)
        return ::testing::AssertionFailure() << "in flight or passed after --idle:\n" << j.dump(2);
    if (j["not_written"]["dropped_in_xdp"].get<uint64_t>() == 0)
        return ::testing::AssertionFailure() << "npf-recv stopped for a quarter of the stream, yet XDP dropped "
                                                "nothing:\n" << j.dump(2);
    return ::testing::AssertionSuccess();
}

} // namespace npf::e2e
