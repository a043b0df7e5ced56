// The pieces of npfd's hostile-client tests (npfd_hostile_test.cpp): a
// thread that connects as another uid, npfd's health (a hello answered,
// descriptors and memory back to a baseline), a well-behaved victim
// (npf-recv --connect receiving a socat stream), and the hostile client
// itself, which speaks the protocol directly and keeps every descriptor it
// handed npfd or got from it, to abuse them.
#pragma once

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "dataplane/flow_ring.h"
#include "engine_fixture.h"
#include "ipc/channel.h"
#include "ipc/protocol.h"
#include "ipc/unix_socket.h"
#include "npfd_rig.h"
#include "on_thread.h"
#include "sys/mmap_area.h"

namespace npf::e2e {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline constexpr uid_t kVictimUid = 65533;
inline constexpr uint16_t kVictimPort = 7500; // the victims' rule: 7500-7599
// A victim's socat stream: 2048 datagrams of 1024 bytes. socat has no flow
// control, so a stream must fit the buffers npf-recv posts up front (4096):
// a longer one can outrun a cold receiver on a loaded machine (drop_rnr)
// through no fault of npfd's.
inline constexpr size_t kStream = 2 << 20;
// npfd answers a hello within this, or it is frozen.
inline constexpr std::chrono::milliseconds kProbe{10000};
// npfd's RSS after an attack may exceed its baseline by this much (heap
// arenas, thread stacks), never more.
#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer keeps freed memory in its quarantine (256 MiB by default)
// before it reuses it.
inline constexpr uint64_t kRssSlackKiB = (64 + 256) << 10;
#else
inline constexpr uint64_t kRssSlackKiB = 64 << 10;
#endif

// ---- config -------------------------------------------------------------------------

// The limits of the hostile clients' rule (uid 65534, ports 7400-7499).
struct RuleLimits {
    uint64_t region = 256ull << 20;
    uint64_t resident = 64ull << 20;
    uint32_t flows = 4;
    uint32_t connections = 16; // the rule key's default: rules() leaves it out
};

// Two rules: uid 65534 (the hostile clients) with `lim`, and uid 65533 (the
// victims, ports 7500-7599) with room to spare for a few victims at once
// (limits are totals over a rule's connections).
inline std::string rules(const RuleLimits& lim = {})
{
    return R"([{"uid": 65534, "ports": ["7400-7499"], "region_bytes": )" + std::to_string(lim.region) +
           R"(, "resident_bytes": )" + std::to_string(lim.resident) + R"(, "flows": )" + std::to_string(lim.flows) +
           R"(},
    {"uid": 65533, "ports": ["7500-7599"], "region_bytes": 268435456, "resident_bytes": 67108864, "flows": 8}])";
}


// ---- credentials, connections ----------------------------------------------------------

// Switches the calling thread, and only it, to effective uid `uid` and
// effective gid nogroup (the socket's group). The raw syscalls: glibc's
// setresuid() would switch every thread of the process. The saved ids stay
// root's. SO_PEERCRED records the effective ids at connect().
inline void becomeUser(uid_t uid)
{
    if (::syscall(SYS_setresgid, -1, kNobody, -1) != 0 || ::syscall(SYS_setresuid, -1, uid, -1) != 0)
        throw std::system_error(errno, std::generic_category(), "setresuid/setresgid on this thread");
}

// `fn()` on a thread of its own that runs as `uid` (becomeUser), its result
// (or exception) handed back.
template <class Fn>
auto asUser(uid_t uid, Fn fn) -> decltype(fn())
{
    return test::onThread([&] {
        becomeUser(uid);
        return fn();
    });
}

// A non-blocking connect: the socket, or an empty Fd while npfd's listen
// backlog is full (EAGAIN). A blocking connect would wait for room forever.
inline Fd tryConnect(const std::string& path)
{
    Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s)
        throw std::system_error(errno, std::generic_category(), "socket");
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0)
        return s;
    if (errno == EAGAIN)
        return Fd();
    throw std::system_error(errno, std::generic_category(), "connect " + path);
}

// Connects within `deadline` (retrying while the backlog is full).
inline Fd connectWithin(const std::string& path, std::chrono::milliseconds deadline)
{
    const auto end = Clock::now() + deadline;
    for (;;) {
        if (Fd s = tryConnect(path))
            return s;
        if (Clock::now() >= end)
            throw std::system_error(ETIMEDOUT, std::generic_category(),
                                    "npfd accepted no connection within " + std::to_string(deadline.count()) +
                                        " ms (its listen backlog stays full)");
        std::this_thread::sleep_for(1ms);
    }
}

inline Fd connectAs(uid_t uid, const std::string& path)
{
    return asUser(uid, [&] { return connectWithin(path, test::kDeadline); });
}

// Sets or clears a file status flag: the open file description's, shared
// with every process that holds a descriptor of it (npfd too, unless it
// opened the file again).
inline void setFlag(int fd, int flag, bool on)
{
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, on ? fl | flag : fl & ~flag) != 0)
        throw std::system_error(errno, std::generic_category(), "fcntl F_SETFL");
}

inline uint64_t fileSize(int fd)
{
    struct stat st{};
    return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Waits up to `deadline` for end of stream on a connection, dropping
// whatever messages come before it.
inline bool awaitEof(int fd, std::chrono::milliseconds deadline = test::kDeadline)
{
    const auto end = Clock::now() + deadline;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0)
            return false;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, int(left)) <= 0)
            continue;
        try {
            if (ipc::recvMessage(fd).status == ipc::IoStatus::Eof)
                return true;
        } catch (const std::exception&) {
            return true; // ECONNRESET
        }
    }
}

// Ends a connection and waits (up to `deadline`) until npfd closed its end:
// then npfd has dropped it, and it no longer counts against any limit.
inline void hangUp(int fd, std::chrono::milliseconds deadline)
{
    (void)::shutdown(fd, SHUT_WR);
    (void)awaitEof(fd, deadline);
}

// ---- npfd's health ------------------------------------------------------------------

// The last `lines` lines of npfd's log, for a failure's message.
inline std::string logTail(const Npfd& npfd, size_t lines = 40)
{
    const std::string log = npfd.log();
    size_t pos = log.size();
    for (size_t n = 0; pos > 0 && n <= lines; n++)
        pos = log.rfind('\n', pos - 1);
    return "npfd's log" + std::string(pos == std::string::npos || pos == 0 ? ":\n" : " (its end):\n") +
           log.substr(pos == std::string::npos ? 0 : pos);
}

// npfd answers a new connection's hello within kProbe. One that does not is
// frozen: with `killFrozen` it is SIGKILLed (it would not stop on SIGTERM
// either), so that the test fails instead of hanging.
inline ::testing::AssertionResult answersHello(Npfd& npfd, bool killFrozen = true)
{
    const auto t0 = Clock::now();
    std::string why;
    try {
        ipc::Channel ch(connectWithin(npfd.socket(), kProbe));
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kProbe - (Clock::now() - t0));
        (void)ch.call(ipc::HelloRequest{.name = "probe"}, {}, std::max(left, 1ms));
        return ::testing::AssertionSuccess();
    } catch (const std::exception& e) {
        why = e.what();
    }
    if (killFrozen && npfd.running()) {
        npfd.kill(SIGKILL);
        int st;
        (void)npfd.wait(int(test::kDeadline.count()), &st);
        why += "; npfd frozen: SIGKILLed";
    }
    return ::testing::AssertionFailure() << "npfd did not answer a hello within " << kProbe.count() << " ms: " << why;
}

// What npfd holds: its open descriptors and its resident memory.
struct Footprint {
    size_t fds = 0;
    uint64_t rssKiB = 0;
};
inline Footprint footprint(const Npfd& d) { return {d.openFds(), d.rssKiB()}; }

// npfd's descriptors back to (at most) the baseline, its RSS within slack of it.
inline ::testing::AssertionResult backToBaseline(const Npfd& d, const Footprint& base)
{
    Footprint now;
    if (test::waitUntil(
            [&] {
                now = footprint(d);
                return now.fds <= base.fds && now.rssKiB <= base.rssKiB + kRssSlackKiB;
            },
            test::kDeadline, 10ms))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "npfd holds " << now.fds << " descriptors (baseline " << base.fds
                                         << ") and " << now.rssKiB << " KiB resident (baseline " << base.rssKiB
                                         << " KiB + " << kRssSlackKiB << " KiB slack)";
}

// ---- a well-behaved client ------------------------------------------------------------

// npf-recv --connect as uid 65533 (the victims' rule), cold in a 16 MiB region
// with a 2 MiB budget (its datagrams take npfd's pager) or warm with a budget
// of the whole region, receiving a socat stream of `bytes`; received()
// compares its output byte for byte.
class Victim {
public:
    // cold: a cold region of 16 MiB, `budget` of it resident at most.
    Victim(Rig& rig, const Npfd& npfd, const TempDir& dir, uint16_t port, size_t bytes, uint32_t seed,
           bool cold = true, const std::string& budget = "2M")
        : rig_(rig), port_(port), bytes_(bytes)
    {
        const std::string stem = dir.path + "/victim-" + std::to_string(port) + "-" + std::to_string(seed);
        in_ = stem + ".in", out_ = stem + ".out", err_ = stem + ".err";
        writeStream(in_, bytes, seed);
        std::vector<std::string> a = {"-n", std::to_string(bytes / 1024), "--idle", "3"};
        if (cold)
            a.insert(a.end(), {"--cold", "--region", "16M", "--budget", budget});
        else
            a.insert(a.end(), {"--region", "16M", "--budget", "16M"});
        child_ = startClientRecvAs(kVictimUid, rig, npfd, port, out_, err_, a);
    }
    ~Victim()
    {
        if (sender_.joinable())
            sender_.join();
        child_.reset();
        std::error_code ec;
        for (const std::string& p : {in_, out_, err_})
            std::filesystem::remove(p, ec);
    }
    Victim(const Victim&) = delete;
    Victim& operator=(const Victim&) = delete;

    ::testing::AssertionResult ready()
    {
        if (auto r = child_->ready(); !r)
            return ::testing::AssertionFailure() << "the victim on port " << port_
                                                 << " did not get its region and flow from npfd: " << r.message();
        return ::testing::AssertionSuccess();
    }
    // socat sends the stream, from its own thread.
    void send()
    {
        sender_ = std::thread([this] { sent_ = socatSend(rig_, in_, port_); });
    }
    ::testing::AssertionResult received()
    {
        if (sender_.joinable())
            sender_.join();
        int st = -1;
        if (!child_->wait(int(test::kDeadline.count()), &st)) {
            std::error_code ec;
            const auto got = std::filesystem::file_size(out_, ec);
            return ::testing::AssertionFailure() << "the victim on port " << port_ << " still waits for its stream ("
                                                 << got << " of " << bytes_ << " bytes) after "
                                                 << test::kDeadline.count() << " ms; its stderr:\n"
                                                 << readFile(err_);
        }
        if (sent_ != 0)
            return ::testing::AssertionFailure() << "socat to port " << port_ << " exited " << sent_;
        const std::string out = readFile(out_), in = readFile(in_);
        if (st != 0 || out != in)
            return ::testing::AssertionFailure() << "the victim on port " << port_ << " exited " << st << " with "
                                                 << out.size() << " of " << in.size() << " bytes"
                                                 << (out.size() == in.size() ? ", not its stream's" : "")
                                                 << "; its stderr:\n"
                                                 << readFile(err_);
        return ::testing::AssertionSuccess();
    }

private:
    Rig& rig_;
    uint16_t port_;
    size_t bytes_;
    std::string in_, out_, err_;
    std::unique_ptr<Child> child_;
    std::thread sender_;
    int sent_ = -1;
};

// One victim, start to finish.
inline ::testing::AssertionResult victimReceives(Rig& rig, Npfd& npfd, const TempDir& dir, uint16_t port, uint32_t seed,
                                          bool cold = true)
{
    Victim v(rig, npfd, dir, port, kStream, seed, cold);
    if (auto r = v.ready(); !r)
        return r;
    v.send();
    return v.received();
}

// ---- the hostile client -------------------------------------------------------------

// A flow of a hostile client: the three descriptors open_flow handed it, the
// post ring and the completion ring mapped.
struct HostileFlow {
    uint32_t id = 0, gen = 0;
    std::optional<dataplane::FlowRing> posts;
    Fd completionFd, notifier;
    MmapArea ring;
    uint64_t prod = 0, cons = 0;

    npf_completion_ring* hdr() const { return ring.as<npf_completion_ring>(); }
    void post(uint64_t offset, uint32_t len)
    {
        posts->posts()[prod++ & (NPF_POST_RING_SIZE - 1)] = npf_post{.offset = offset, .len = len, .pad = 0};
    }
    void publish()
    {
        std::atomic_ref<__u64>(posts->cursor()->prod).store(prod, std::memory_order_release);
        std::atomic_ref<__u32>(posts->cursor()->flags).fetch_or(NPF_CURSOR_F_SERVED, std::memory_order_release);
    }
    // Appends the completions published since the last call to `out`.
    void take(std::vector<npf_completion>& out)
    {
        const uint64_t p = std::atomic_ref<__u64>(hdr()->prod).load(std::memory_order_acquire);
        const uint32_t size = hdr()->size;
        const auto* e = reinterpret_cast<const npf_completion*>(ring.as<char>() + sizeof(npf_completion_ring));
        for (; cons < p && p - cons <= size; cons++)
            out.push_back(e[cons & (size - 1)]);
        std::atomic_ref<__u64>(hdr()->cons).store(cons, std::memory_order_release);
    }
};

// A client that speaks the protocol itself, connected as uid 65534: its
// region is a memfd it maps, registered with its own userfaultfd (and
// optionally a spill memfd), as npf::Client's; it holds every descriptor it
// handed npfd or got from it, to abuse them. `hello` sets the versions it
// claims (npfd_versions_test.cpp: a client of the previous protocol).
struct Hostile {
    explicit Hostile(const Npfd& d, const std::string& name, uid_t uid = kNobody, ipc::HelloRequest hello = {})
        : ch(connectAs(uid, d.socket()))
    {
        hello.name = name;
        helloReply = ch.call(hello).reply;
    }
    ~Hostile()
    {
        hangUp(ch.fd(), 5s); // at once after leave()
        if (base)
            ::munmap(base, size);
    }
    Hostile(const Hostile&) = delete;
    Hostile& operator=(const Hostile&) = delete;

    // Creates the region and hands it to npfd (throws RemoteError if refused).
    void region(uint64_t bytes, uint64_t budget, bool withSpill = false)
    {
        size = bytes;
        memfd.reset(::memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING));
        if (!memfd || ::ftruncate(memfd.get(), off_t(size)) != 0)
            throw std::system_error(errno, std::generic_category(), "region memfd");
        void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd.get(), 0);
        if (p == MAP_FAILED)
            throw std::system_error(errno, std::generic_category(), "mmap region");
        base = static_cast<uint8_t*>(p);
        uffd.reset(static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY)));
        uffdio_api api{.api = UFFD_API, .features = UFFD_FEATURE_MISSING_SHMEM, .ioctls = 0};
        uffdio_register reg{};
        reg.range = {reinterpret_cast<uint64_t>(base), size};
        reg.mode = UFFDIO_REGISTER_MODE_MISSING;
        if (!uffd || ::ioctl(uffd.get(), UFFDIO_API, &api) != 0 || ::ioctl(uffd.get(), UFFDIO_REGISTER, &reg) != 0)
            throw std::system_error(errno, std::generic_category(), "userfaultfd");
        std::vector<int> fds = {memfd.get(), uffd.get()};
        if (withSpill) {
            spill.reset(::memfd_create("hostile-spill", MFD_CLOEXEC));
            if (!spill || ::ftruncate(spill.get(), off_t(size)) != 0)
                throw std::system_error(errno, std::generic_category(), "spill memfd");
            fds.push_back(spill.get());
        }
        (void)ch.call(ipc::RegionRequest{.size = size, .budget = budget, .base = reinterpret_cast<uint64_t>(base)},
                      fds);
    }

    HostileFlow openFlow(uint16_t port, const std::string& addr = "")
    {
        ipc::OpenFlowRequest rq{.port = port};
        rq.addr = addr;
        auto r = ch.call(rq);
        HostileFlow f;
        f.id = r.reply.flow;
        f.gen = r.reply.gen;
        f.posts.emplace(dataplane::FlowRing::adopt(std::move(r.fds[0])));
        f.completionFd = std::move(r.fds[1]);
        f.notifier = std::move(r.fds[2]);
        f.ring = MmapArea::map(fileSize(f.completionFd.get()), PROT_READ | PROT_WRITE, MAP_SHARED,
                               f.completionFd.get(), 0, "completion ring");
        return f;
    }

    // [offset, offset + len) of the region as this client has it: from its
    // memfd, or, for a page npfd evicted (a hole in the memfd), from its spill
    // (where npfd saves evicted pages at their region offsets).
    std::string read(uint64_t offset, size_t len) const
    {
        std::string out(len, '\0');
        for (uint64_t pos = offset; pos < offset + len;) {
            const uint64_t page = pos & ~uint64_t{4095}, end = std::min<uint64_t>(offset + len, page + 4096);
            const bool present = ::lseek(memfd.get(), off_t(page), SEEK_DATA) == off_t(page);
            const int from = present || !spill ? memfd.get() : spill.get();
            if (::pread(from, out.data() + (pos - offset), end - pos, off_t(pos)) < 0)
                throw std::system_error(errno, std::generic_category(), "pread");
            pos = end;
        }
        return out;
    }

    // Every completion OK, and datagram `seq` of `sender` (size bytes) in its buffer.
    ::testing::AssertionResult holds(const std::vector<npf_completion>& got, uint32_t sender, uint32_t bytes) const
    {
        size_t bad = 0, notOk = 0;
        std::string first;
        for (const npf_completion& c : got) {
            if (c.status != NPF_CS_OK) {
                notOk++;
                continue;
            }
            const std::vector<uint8_t> want = payloadFor(senderId(sender, uint32_t(c.seq)), bytes);
            if (c.len != bytes || std::memcmp(read(c.offset, c.len).data(), want.data(), bytes) != 0) {
                if (!bad++)
                    first = "datagram " + std::to_string(c.seq) + " at offset " + std::to_string(c.offset);
            }
        }
        if (!bad && !notOk)
            return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << notOk << " completions not OK, " << bad << " of " << got.size()
                                             << " completed datagrams not in their buffers (first: " << first << ")";
    }

    // bye, then the end of the connection: npfd has closed this client's flows.
    ::testing::AssertionResult leave()
    {
        try {
            (void)ch.call(ipc::ByeRequest{});
        } catch (const std::exception& e) {
            return ::testing::AssertionFailure() << "bye: " << e.what();
        }
        if (!awaitEof(ch.fd()))
            return ::testing::AssertionFailure() << "npfd did not close the connection within "
                                                 << test::kDeadline.count()
                                                 << " ms of its reply to bye (stuck closing the client?)";
        return ::testing::AssertionSuccess();
    }

    ipc::Channel ch;
    ipc::HelloReply helloReply;
    Fd memfd, uffd, spill;
    uint8_t* base = nullptr;
    uint64_t size = 0;
};

// Sends `n` datagrams of `bytes` from `sender` to the hostile flow on `port`
// (flow control: at most `window` ahead of its completions) and collects
// their `n` completions.
inline ::testing::AssertionResult receive(Rig& rig, HostileFlow& f, uint16_t port, uint32_t sender, uint32_t n,
                                   uint32_t (*size)(uint32_t), uint32_t window, std::vector<npf_completion>& got)
{
    {
        Sender tx(rig.veth(), {.sender = sender, .count = n, .dstPort = port, .size = size});
        tx.flowControl(window, [&] {
            f.take(got);
            return uint64_t(got.size());
        });
        tx.start();
        tx.join();
        if (!tx.error().empty())
            return ::testing::AssertionFailure() << "sender: " << tx.error();
    }
    if (!test::waitUntil([&] {
            f.take(got);
            return got.size() >= n;
        }))
        return ::testing::AssertionFailure() << "the flow completed " << got.size() << " of " << n << " datagrams";
    return ::testing::AssertionSuccess();
}

// Turns an exception out of an attack into a failure naming it.
template <class F>
inline ::testing::AssertionResult attempt(const char* what, F f)
{
    try {
        return f();
    } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << what << ": " << e.what();
    }
}

// The part of an attack during which the hostile client is armed and connected.
using During = std::function<void()>;

// Connections from uid 65534 that never say hello: `target` of them held
// open, each one npfd closes replaced by a new one (at most 8 per 10 ms),
// until stop(). Counts what npfd answered them.
class IdleFlood {
public:
    IdleFlood(std::string path, size_t target) : path_(std::move(path)), target_(target), thread_([this] { run(); })
    {
    }
    ~IdleFlood() { stop(); }
    void stop()
    {
        stop_ = true;
        if (thread_.joinable())
            thread_.join();
    }

    std::atomic<uint64_t> connected{0}, closed{0}, backlogFull{0};
    std::atomic<uint64_t> refused{0};  // error no_space (a limit), then closed
    std::atomic<uint64_t> timedOut{0}; // error bad_message with errno ETIMEDOUT (no hello in time), then closed
    std::atomic<uint64_t> other{0};    // anything else
    std::atomic<size_t> most{0};       // the most held at once
    std::string failure() const
    {
        std::lock_guard<std::mutex> lock(mu_);
        return failure_;
    }
    std::string describe() const
    {
        return "connected " + std::to_string(connected) + ", closed by npfd " + std::to_string(closed) +
               " (no_space " + std::to_string(refused) + ", hello timeout " + std::to_string(timedOut) + ", other " +
               std::to_string(other) + "), held at most " + std::to_string(most) + " at once, backlog full " +
               std::to_string(backlogFull) + (failure().empty() ? "" : ", " + failure());
    }

private:
    void note(const std::string& what)
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (failure_.empty())
            failure_ = what;
    }
    // Reads what npfd sent; true once it closed the connection.
    bool drain(int fd)
    {
        for (;;) {
            ipc::RecvResult r;
            try {
                r = ipc::recvMessage(fd);
            } catch (const std::exception&) {
                return true;
            }
            if (r.status == ipc::IoStatus::WouldBlock)
                return false;
            if (r.status == ipc::IoStatus::Eof)
                return true;
            try {
                const ipc::ErrorReply e = ipc::ErrorReply::decode(ipc::parse(r.message.bytes));
                if (e.code == ipc::ErrorCode::NoSpace)
                    refused++;
                else if (e.code == ipc::ErrorCode::BadMessage && e.err == ETIMEDOUT)
                    timedOut++;
                else {
                    other++;
                    note("npfd sent " + r.message.bytes);
                }
            } catch (const std::exception&) {
                other++;
                note("npfd sent " + r.message.bytes);
            }
        }
    }
    void run()
    {
        std::vector<Fd> fds;
        try {
            becomeUser(kNobody);
            while (!stop_) {
                for (int k = 0; k < 8 && fds.size() < target_; k++) {
                    Fd s = tryConnect(path_);
                    if (!s) {
                        backlogFull++;
                        break;
                    }
                    fds.push_back(std::move(s));
                    connected++;
                }
                most = std::max(most.load(), fds.size());
                std::vector<pollfd> p;
                for (const Fd& f : fds)
                    p.push_back({f.get(), POLLIN, 0});
                (void)::poll(p.data(), p.size(), 10);
                for (size_t i = p.size(); i-- > 0;)
                    if (p[i].revents && drain(fds[i].get())) {
                        closed++;
                        fds.erase(fds.begin() + long(i));
                    }
                std::this_thread::sleep_for(10ms); // pacing, not correctness
            }
        } catch (const std::exception& e) {
            note(e.what());
        }
        // Gone from npfd's books before stop() returns.
        for (const Fd& f : fds)
            (void)::shutdown(f.get(), SHUT_WR);
        const auto end = Clock::now() + test::kDeadline;
        for (const Fd& f : fds) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
            (void)awaitEof(f.get(), std::max(left, 1ms));
        }
    }

    std::string path_;
    size_t target_;
    std::atomic<bool> stop_{false};
    mutable std::mutex mu_;
    std::string failure_;
    std::thread thread_;
};

// How npfd answered a connection's hello: "ok", or the error's code name
// (a limit: npfd sent the error with id 0 when it accepted the connection and
// closed it, whatever the client sent), and the error's message.
struct HelloAnswer {
    std::string answer;
    std::string message; // an error's
    bool closed = false; // npfd closed the connection after it
    Fd fd;
};
inline HelloAnswer helloAs(uid_t uid, const std::string& path,
                           const ipc::HelloRequest& hello = ipc::HelloRequest{.name = "limits"})
{
    HelloAnswer out;
    out.fd = connectAs(uid, path);
    try {
        (void)ipc::sendMessage(out.fd.get(), hello.encode(1));
    } catch (const std::exception&) {
        // npfd closed it already; its error is still queued
    }
    pollfd p{out.fd.get(), POLLIN, 0};
    if (::poll(&p, 1, int(test::kDeadline.count())) != 1)
        throw std::runtime_error("npfd did not answer a hello within the deadline");
    ipc::RecvResult r = ipc::recvMessage(out.fd.get());
    if (r.status == ipc::IoStatus::Eof) // ECONNRESET first if npfd closed with our hello unread: read on
        r = ipc::recvMessage(out.fd.get());
    if (r.status != ipc::IoStatus::Ok)
        throw std::runtime_error("npfd closed the connection without a reply");
    const ipc::Message m = ipc::parse(r.message.bytes);
    if (m.type == "ok") {
        out.answer = "ok";
        return out;
    }
    const ipc::ErrorReply e = ipc::ErrorReply::decode(m);
    out.answer = std::string(ipc::toString(e.code));
    out.message = e.message;
    out.closed = awaitEof(out.fd.get());
    return out;
}

// ---- an attack, start to finish ----------------------------------------------------

// What every attack test ends with, the hostile client gone: npfd answers
// (else it is frozen: SIGKILLed, failed), a new victim receives byte for
// byte, npfd's descriptors and memory are back to `base`, npfd stops on
// SIGTERM with exit 0.
inline void expectRecovered(Rig& rig, Npfd& npfd, const TempDir& dir, const Footprint& base)
{
    ASSERT_TRUE(answersHello(npfd)) << "after the attack\n" << logTail(npfd);
    EXPECT_TRUE(victimReceives(rig, npfd, dir, kVictimPort + 40, 77)) << "after the attack";
    EXPECT_TRUE(backToBaseline(npfd, base)) << "after the attack";
    EXPECT_EQ(npfd.stop(), 0) << "npfd did not stop on SIGTERM (-1: still running after "
                              << test::kDeadline.count() << " ms)";
}

// A rig and npfd of their own (the two rules, `lim` the hostile one's), then
// attack(rig, npfd, during) with a victim receiving its stream while the
// hostile client is armed, then expectRecovered().
template <class Attack>
inline void underAttack(const char* what, const RuleLimits& lim, Attack attack)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, NpfdOptions{.clients = rules(lim)});
    const Footprint base = footprint(npfd);
    Victim victim(rig, npfd, dir, kVictimPort, kStream, 11);
    ASSERT_TRUE(victim.ready());
    bool sent = false;
    const ::testing::AssertionResult held = attempt(what, [&] {
        return attack(rig, npfd, [&] {
            victim.send();
            sent = true;
            EXPECT_TRUE(victim.received()) << "during the attack";
        });
    });
    EXPECT_TRUE(held) << logTail(npfd);
    if (!sent) { // the attack ended early: the victim receives all the same
        victim.send();
        EXPECT_TRUE(victim.received()) << "during the attack";
    }
    expectRecovered(rig, npfd, dir, base);
}

} // namespace npf::e2e
