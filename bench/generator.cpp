#include "generator.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/ether.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>

#include "bench_abi.h"
#include "bench_gen.skel.h"
#include "sys/csum.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"
#include "sys/thread.h"
#include "topology.h"

namespace npf::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Enters the network namespace at `path` (this thread only).
void enterNetns(const std::string& path)
{
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd || ::setns(fd.get(), CLONE_NEWNET) < 0)
        throwErrno("enter network namespace " + path);
}

double threadCpu()
{
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Paces one thread by catching up: each call sends what is due by now (at
// most `cap`), so a thread that was descheduled for a while (2 shared vCPUs)
// still offers the configured average rate. 0 = nothing due yet.
struct Pacer {
    double rate; // 0 = unpaced
    uint64_t cap;
    Clock::time_point start = Clock::now();
    uint64_t due(uint64_t done) const
    {
        if (rate <= 0)
            return cap;
        const double t = std::chrono::duration<double>(Clock::now() - start).count();
        const double want = t * rate - double(done);
        if (want < 1) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
            return 0;
        }
        return std::min<uint64_t>(cap, uint64_t(want));
    }
};

// Runs fn(i, end) once per configured CPU: in threads (run), or in child
// processes (spawn, then go). A real sender is another host, not threads of
// the receiving process: sharing its address space would make every TLB
// shootdown of the receiver (pages punched out of the region) interrupt the
// generator's CPU as well, which is a cost of this benchmark, not of npf.
// The children are forked before the receiver is set up and wait for go():
// forked inside the measured window, after the receiver, they shared its
// private memory copy-on-write, so every page the receiver wrote while they
// lived was a page fault and a fresh page (static-pinned's prefaulted region,
// the kernel sockets' buffers), and fork copied the pinned UMEM pages.
class Threads {
public:
    template <typename Fn>
    void run(const TrafficConfig& c, double seconds, Fn fn)
    {
        const Clock::time_point end = endAfter(seconds);
        for (size_t i = 0; i < c.cpus.size(); i++)
            threads_.emplace_back([this, &c, end, fn, i] {
                const double t0 = threadCpu();
                std::string err = runOne(c, i, end, fn);
                std::lock_guard<std::mutex> l(mu_);
                cpu_ += threadCpu() - t0;
                if (!err.empty())
                    error_ = err;
            });
    }

    // Forks one child per CPU; each waits for go() (or exits if it never comes).
    template <typename Fn>
    void spawn(const TrafficConfig& c, Fn fn)
    {
        shared_ = MmapArea::map(sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0,
                                "generator status page");
        for (size_t i = 0; i < c.cpus.size(); i++) {
            int p[2]; // a socket pair, not a pipe: go() to a child that is gone is EPIPE, not SIGPIPE
            if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) != 0)
                throwErrno("socket pair for a generator process");
            Fd readEnd(p[0]);
            goFds_.emplace_back(p[1]);
            const pid_t parent = ::getpid();
            const pid_t pid = ::fork();
            if (pid < 0)
                throwErrno("fork a generator process");
            if (pid == 0)
                childMain(c, i, readEnd.get(), parent, fn);
            pids_.push_back(pid);
        }
    }
    // Starts the spawned children: they send for `seconds` from now.
    void go(double seconds)
    {
        const int64_t end = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                endAfter(seconds).time_since_epoch()).count();
        for (Fd& fd : goFds_)
            if (::send(fd.get(), &end, sizeof end, MSG_NOSIGNAL) != ssize_t(sizeof end)) {
                std::lock_guard<std::mutex> l(mu_);
                error_ = "start a generator process: " + std::string(strerror(errno)); // it is gone: join() reaps it
            }
        goFds_.clear();
    }
    void join()
    {
        for (auto& t : threads_)
            t.join();
        threads_.clear();
        goFds_.clear(); // children still waiting for go() exit
        for (pid_t pid : pids_) {
            int status = 0;
            rusage ru{};
            while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
            }
            std::lock_guard<std::mutex> l(mu_);
            cpu_ += double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
            if (shared_ && shared_.as<Shared>()->error[0])
                error_ = shared_.as<Shared>()->error;
        }
        pids_.clear();
    }
    double cpu() const { return cpu_; }
    std::string error() const
    {
        std::lock_guard<std::mutex> l(mu_);
        return error_;
    }
    ~Threads() { join(); }

private:
    struct Shared {
        char error[512];
    };

    static Clock::time_point endAfter(double seconds)
    {
        return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    }

    // A spawned child: waits for the end time on `goFd`, sends, exits. It
    // dies with the bench (PR_SET_PDEATHSIG) and holds no parent end of any
    // start socket, so end of file means "no run": exit.
    template <typename Fn>
    [[noreturn]] void childMain(const TrafficConfig& c, size_t i, int goFd, pid_t parent, Fn& fn) noexcept
    {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent)
            ::_exit(1);
        for (Fd& fd : goFds_)
            ::close(fd.release());
        int64_t end = 0;
        ssize_t n;
        while ((n = ::read(goFd, &end, sizeof end)) < 0 && errno == EINTR) {
        }
        if (n != ssize_t(sizeof end))
            ::_exit(0);
        const Clock::time_point until{std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(end))};
        std::string err = runOne(c, i, until, fn);
        if (!err.empty())
            std::snprintf(shared_.as<Shared>()->error, sizeof(Shared::error), "%s", err.c_str());
        ::_exit(err.empty() ? 0 : 1);
    }

    template <typename Fn>
    static std::string runOne(const TrafficConfig& c, size_t i, Clock::time_point end, Fn& fn) noexcept
    {
        try {
            npf::pinThread(c.cpus[i], "npf-bench generator");
            enterNetns(c.txNsPath);
            fn(i, end);
            return {};
        } catch (const std::exception& e) {
            return e.what();
        }
    }

    std::vector<std::thread> threads_;
    std::vector<pid_t> pids_;
    std::vector<Fd> goFds_; // spawned children's start sockets, until go()
    MmapArea shared_;
    mutable std::mutex mu_;
    double cpu_ = 0;
    std::string error_;
};

class LiveGenerator final : public Sender {
public:
    explicit LiveGenerator(const TrafficConfig& c) : c_(c), frame_(templateFrame(c))
    {
        skel_ = bench_gen__open();
        if (!skel_)
            throwErrno("open the npfb_gen BPF object");
        configureGenerator(skel_, c, frame_);
        if (int rc = bench_gen__load(skel_)) {
            bench_gen__destroy(skel_);
            throwErrno(-rc, "load the npfb_gen XDP program");
        }
        anchor(true);
        try {
            threads_.spawn(c_, [this](size_t i, Clock::time_point end) { loop(i, end); });
        } catch (...) {
            threads_.join();
            try {
                anchor(false);
            } catch (const std::exception&) { // the anchor veth goes away with the tx namespace anyway
            }
            bench_gen__destroy(skel_);
            throw;
        }
    }
    ~LiveGenerator() override
    {
        threads_.join();
        try {
            anchor(false);
        } catch (const std::exception&) {
            // the anchor veth goes away with the tx namespace anyway
        }
        bench_gen__destroy(skel_);
    }

    void start(double seconds) override { threads_.go(seconds); }
    void join() override { threads_.join(); }
    uint64_t sent() const override { return __atomic_load_n(&skel_->bss->npfb_seq, __ATOMIC_RELAXED); }
    double cpuSeconds() const override { return threads_.cpu(); }
    std::string error() const override { return threads_.error(); }
    const char* kind() const override { return "xdp-live-frames"; }
    bool separateProcesses() const override { return true; }

private:
    // Every test run of an XDP program that is not in the kernel's XDP
    // dispatcher adds it and removes it again, each time with a
    // synchronize_rcu(): ~25 ms per call on this VM, whatever the repeat
    // count. Keeping the program attached to a spare, down veth pair in the
    // tx namespace keeps it in the dispatcher, so test runs cost nothing extra.
    void anchor(bool attach)
    {
        std::string err;
        std::thread t([&] {
            try {
                enterNetns(c_.txNsPath);
                if (attach && !if_nametoindex(kAnchor) &&
                    npf::topology::sh(std::string("ip link add ") + kAnchor + " type veth peer name " + kAnchor + "p") != 0)
                    throw std::runtime_error(std::string("cannot create the anchor veth ") + kAnchor);
                const int ifindex = int(if_nametoindex(kAnchor));
                if (!ifindex)
                    throwErrno(std::string("find ") + kAnchor);
                int rc = attach ? bpf_xdp_attach(ifindex, bpf_program__fd(skel_->progs.npfb_gen), XDP_FLAGS_DRV_MODE,
                                                 nullptr)
                                : bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, nullptr);
                if (rc)
                    throwErrno(-rc, std::string(attach ? "attach npfb_gen to " : "detach npfb_gen from ") + kAnchor);
            } catch (const std::exception& e) {
                err = e.what();
            }
        });
        t.join();
        if (!err.empty())
            throw std::runtime_error(err);
    }
    static constexpr const char* kAnchor = "npfb-anchor";

    void loop(size_t, Clock::time_point end)
    {
        const unsigned ifindex = if_nametoindex(c_.txIf.c_str());
        if (!ifindex)
            throwErrno("find " + c_.txIf + " in " + c_.txNsPath);
        const double rate = c_.pps / double(c_.cpus.size());
        xdp_md ctx{};
        ctx.data_end = uint32_t(frame_.size());
        ctx.ingress_ifindex = ifindex;
        // Paced: small catch-up bursts (a burst longer than the 2048-entry RX rings
        // would measure burst loss, not the receivers).
        Pacer pacer{rate, rate > 0 ? 256u : 8192u};
        uint64_t done = 0;
        while (Clock::now() < end) {
            const int chunk = int(pacer.due(done));
            if (!chunk)
                continue;
            LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame_.data(), .data_size_in = uint32_t(frame_.size()),
                        .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = chunk,
                        .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = 64);
            if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.npfb_gen), &opts) < 0)
                throwErrno("run npfb_gen in live-frames mode on " + c_.txIf);
            done += uint64_t(chunk);
        }
    }

    TrafficConfig c_;
    std::vector<uint8_t> frame_;
    ::bench_gen* skel_ = nullptr;
    Threads threads_; // spawned processes; their counter is in the program's mmapped .bss: shared with the children
};

// Sends from child processes, as LiveGenerator does, forked before the
// receiver exists: a sending thread of the bench's own process shared the
// receiver's address space, so every TLB shootdown of the pager's page
// moves and evictions interrupted the sender's CPU as well, and the sender
// offered npf less than the others under memory pressure. A real sender is
// another host.
class SocketSender final : public Sender {
public:
    explicit SocketSender(const TrafficConfig& c)
        : c_(c), seq_(MmapArea::map(sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                                    -1, 0, "sender's counter"))
    {
        static_assert(std::atomic<uint64_t>::is_always_lock_free); // shared between processes
        new (seq_.get()) std::atomic<uint64_t>(0);
        threads_.spawn(c_, [this](size_t i, Clock::time_point end) { loop(i, end); });
    }
    ~SocketSender() override { threads_.join(); }
    void start(double seconds) override { threads_.go(seconds); }
    void join() override { threads_.join(); }
    uint64_t sent() const override { return seq().load(); }
    double cpuSeconds() const override { return threads_.cpu(); }
    std::string error() const override { return threads_.error(); }
    const char* kind() const override { return "sendmmsg"; }
    bool separateProcesses() const override { return true; }

private:
    void loop(size_t t, Clock::time_point end)
    {
        Fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        if (!fd)
            throwErrno("UDP socket for the sender");
        int sndbuf = 8 << 20;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf));
        // The stack checksums what it sends (the bench veth has tx offload
        // off); SO_NO_CHECK sends 0 instead.
        int noCheck = c_.udpCsum ? 0 : 1;
        if (::setsockopt(fd.get(), SOL_SOCKET, SO_NO_CHECK, &noCheck, sizeof(noCheck)) < 0)
            throwErrno("SO_NO_CHECK on the sender's socket");
        sockaddr_in src{}, dst{};
        src.sin_family = dst.sin_family = AF_INET;
        src.sin_port = htons(uint16_t(c_.sportBase + t % std::max(1u, c_.flows)));
        inet_pton(AF_INET, c_.srcAddr.c_str(), &src.sin_addr);
        dst.sin_port = htons(c_.dport);
        inet_pton(AF_INET, c_.dstAddr.c_str(), &dst.sin_addr);
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof(src)) < 0 ||
            ::connect(fd.get(), reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) < 0)
            throwErrno("bind/connect the sender to " + c_.dstAddr);
        constexpr unsigned kBatch = 32;
        std::vector<uint8_t> bufs(size_t(kBatch) * c_.payload);
        for (unsigned b = 0; b < kBatch; b++)
            for (uint32_t i = sizeof(npfb_hdr); i < c_.payload; i++)
                bufs[b * c_.payload + i] = npfb_pattern(i);
        iovec iov[kBatch];
        mmsghdr msgs[kBatch]{};
        const double rate = c_.pps / double(c_.cpus.size());
        Pacer pacer{rate, kBatch};
        uint64_t done = 0;
        while (Clock::now() < end) {
            const unsigned n = unsigned(pacer.due(done));
            if (!n)
                continue;
            const uint64_t first = seq().fetch_add(n);
            for (unsigned b = 0; b < n; b++) {
                npfb_hdr h{NPFB_MAGIC, uint32_t(t), first + b, 0};
                timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                h.tstamp = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
                std::memcpy(&bufs[b * c_.payload], &h, sizeof(h));
                iov[b] = {&bufs[b * c_.payload], c_.payload};
                msgs[b].msg_hdr.msg_iov = &iov[b];
                msgs[b].msg_hdr.msg_iovlen = 1;
            }
            unsigned off = 0;
            while (off < n) {
                int r = ::sendmmsg(fd.get(), msgs + off, n - off, 0);
                if (r < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EINTR)) {
                    sched_yield();
                    continue;
                }
                if (r < 0)
                    throwErrno("sendmmsg to " + c_.dstAddr);
                off += unsigned(r);
            }
            done += n;
        }
    }

    std::atomic<uint64_t>& seq() const { return *seq_.as<std::atomic<uint64_t>>(); }

    TrafficConfig c_;
    MmapArea seq_; // the children's datagrams so far: a shared page
    Threads threads_;
};

} // namespace

namespace {

void putMac(uint8_t* to, const std::string& text, const char* what)
{
    ether_addr mac;
    if (!ether_aton_r(text.c_str(), &mac))
        throw std::invalid_argument(std::string(what) + ": not a MAC address: '" + text + "'");
    std::memcpy(to, mac.ether_addr_octet, ETH_ALEN);
}

void putIpv4(uint8_t* to, const std::string& text, const char* what)
{
    if (inet_pton(AF_INET, text.c_str(), to) != 1)
        throw std::invalid_argument(std::string(what) + ": not an IPv4 address: '" + text + "'");
}

void put16(uint8_t* p, uint16_t v) // network order
{
    p[0] = uint8_t(v >> 8);
    p[1] = uint8_t(v);
}

// The sum of the IPv4 pseudo-header of a UDP datagram of udpLen bytes
// (header included) in the IPv4 header at ip.
uint64_t pseudoHeaderSum(const uint8_t* ip, uint16_t udpLen)
{
    uint8_t pseudo[12] = {};
    std::memcpy(pseudo, ip + 12, 8); // source and destination
    pseudo[9] = IPPROTO_UDP;
    put16(pseudo + 10, udpLen);
    return npf::csumPartial(pseudo, sizeof(pseudo));
}

// ~sum in memory order, as RFC 1071 allows: no byte swaps.
void putCsum(uint8_t* p, uint64_t sum, bool zeroIsFfff)
{
    uint16_t c = uint16_t(~npf::csumFold(sum));
    if (c == 0 && zeroIsFfff)
        c = 0xffff;
    std::memcpy(p, &c, 2);
}

} // namespace

std::vector<uint8_t> templateFrame(const TrafficConfig& c)
{
    if (c.payload < sizeof(npfb_hdr))
        throw std::invalid_argument("payload of " + std::to_string(c.payload) + " bytes is smaller than the " +
                                    std::to_string(sizeof(npfb_hdr)) + "-byte bench header");
    if (c.payload > 0xffff - (NPFB_PAYLOAD_OFF - 14))
        throw std::invalid_argument("payload of " + std::to_string(c.payload) + " bytes does not fit an IPv4 datagram");
    std::vector<uint8_t> f(NPFB_PAYLOAD_OFF + c.payload, 0);
    // Ethernet
    putMac(f.data(), c.dstMac, "destination MAC");
    putMac(f.data() + 6, c.srcMac, "source MAC");
    put16(f.data() + 12, ETH_P_IP);
    // IPv4, no options, DF clear, TTL 64
    uint8_t* ip = f.data() + 14;
    ip[0] = 0x45;
    put16(ip + 2, uint16_t(NPFB_PAYLOAD_OFF - 14 + c.payload));
    ip[8] = 64;
    ip[9] = IPPROTO_UDP;
    putIpv4(ip + 12, c.srcAddr, "source address");
    putIpv4(ip + 16, c.dstAddr, "destination address");
    putCsum(ip + 10, npf::csumPartial(ip, 20), false);
    // UDP, then the payload: the bench header (seq, flow, tstamp 0: npfb_gen writes them) and the pattern
    uint8_t* udp = f.data() + NPFB_UDP_OFF;
    const uint16_t udpLen = uint16_t(8 + c.payload);
    put16(udp, c.sportBase);
    put16(udp + 2, c.dport);
    put16(udp + 4, udpLen);
    uint8_t* payload = f.data() + NPFB_PAYLOAD_OFF;
    for (uint32_t i = 0; i < c.payload; i++)
        payload[i] = npfb_pattern(i);
    const npfb_hdr h{NPFB_MAGIC, 0, 0, 0};
    std::memcpy(payload, &h, sizeof(h));
    if (c.udpCsum) {
        putCsum(udp + 6, npf::csumPartial(udp, udpLen, pseudoHeaderSum(ip, udpLen)), true);
    }
    return f;
}

bool udpCsumHolds(const uint8_t* frame, uint32_t payloadLen, uint64_t payloadSum) noexcept
{
    const uint8_t* ip = frame + 14;
    const uint8_t* udp = frame + NPFB_UDP_OFF;
    if (!udp[6] && !udp[7])
        return true;
    const uint64_t header = npf::csumPartial(udp, 8, pseudoHeaderSum(ip, uint16_t(8 + payloadLen)));
    return npf::csumFold(payloadSum + header) == 0xffff;
}

void configureGenerator(::bench_gen* skel, const TrafficConfig& c, const std::vector<uint8_t>& frame)
{
    skel->rodata->sport_base = c.sportBase;
    skel->rodata->nflows = c.flows ? c.flows : 1;
    skel->rodata->udp_csum = c.udpCsum;
    if (!c.udpCsum)
        return;
    // Pseudo-header (addresses, protocol, UDP length) + the UDP datagram with
    // the fields npfb_gen writes zeroed, summed in memory byte order as
    // npfb_gen adds the rest.
    const size_t udpLen =
        frame.size() < NPFB_PAYLOAD_OFF ? 0 : size_t(frame[NPFB_UDP_OFF + 4]) << 8 | frame[NPFB_UDP_OFF + 5];
    if (udpLen < 8 + sizeof(npfb_hdr) || NPFB_UDP_OFF + udpLen > frame.size())
        throw std::invalid_argument("generator template frame of " + std::to_string(frame.size()) +
                                    " bytes: no UDP datagram with a bench header");
    std::vector<uint8_t> b(12 + udpLen, 0);
    std::memcpy(b.data(), frame.data() + 14 + 12, 8); // IPv4 source and destination
    b[9] = IPPROTO_UDP;
    std::memcpy(b.data() + 10, frame.data() + NPFB_UDP_OFF + 4, 2); // UDP length
    std::memcpy(b.data() + 12, frame.data() + NPFB_UDP_OFF, udpLen);
    uint8_t* udp = b.data() + 12;
    std::memset(udp, 0, 2);                    // source port
    std::memset(udp + 6, 0, 2);                // checksum
    std::memset(udp + 8, 0, sizeof(npfb_hdr)); // magic, flow, seq, tstamp
    skel->rodata->csum_fixed = npf::csumFold(npf::csumPartial(b.data(), b.size()));
}

std::string liveFramesRefused()
{
    ::bench_gen* skel = bench_gen__open_and_load();
    if (!skel)
        return std::string("load npfb_gen: ") + std::strerror(errno);
    std::vector<uint8_t> frame(64, 0);
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = uint32_t(frame.size()), .repeat = 1,
                .flags = BPF_F_TEST_XDP_LIVE_FRAMES);
    const int rc = bpf_prog_test_run_opts(bpf_program__fd(skel->progs.npfb_probe), &opts);
    const int err = errno;
    bench_gen__destroy(skel);
    return rc < 0 ? std::strerror(err) : "";
}

std::unique_ptr<Sender> makeLiveGenerator(const TrafficConfig& c) { return std::make_unique<LiveGenerator>(c); }
std::unique_ptr<Sender> makeSocketSender(const TrafficConfig& c) { return std::make_unique<SocketSender>(c); }

} // namespace npf::bench
