// Kill soak (ctest label soak): npf-recv (the real binary) in the rx
// namespace is killed with SIGKILL mid-stream and restarted, NPF_SOAK_CYCLES
// times (default 100), on one veth pair. Each cycle sends one stream of
// datagrams in three parts and checks every byte of it:
//   A  to the running npf-recv (from cycle 1 on a restarted one, which took
//      the flow over): it must write all of A;
//   B  npf-recv is killed while B is being sent;
//   C  sent after the kill was reaped: nobody serves the flow.
// Then: XDP saw every datagram and counted each as steered to npf or passed
// to the kernel, nothing else; the kernel socket got exactly the passed ones,
// a contiguous tail of the stream (all of C), byte-exact; the killed
// npf-recv's output is exactly a prefix of the stream (all of A), up to where
// the kernel's part begins. npf-recv then restarts while another stream runs
// (restartUnderTraffic: the kernel gets its head, npf-recv the rest, the
// datagrams in between are counted). At the end a last npf-recv receives a
// whole stream and exits cleanly, npf is detached, and no pins or namespaces
// remain.
// Waits are on events (ready line, counters, file sizes) with generous
// deadlines; nothing here asserts a rate. NPF_SOAK_SEED picks the kill points.
#include <signal.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "engine_fixture.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint16_t kPort = 7301;
constexpr int kDeadlineMs = 30000; // for anything that should take milliseconds

uint64_t envOr(const char* name, uint64_t dflt)
{
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 0) : dflt;
}

uint32_t sizeVaried(uint32_t k) { return 1472 - (k * 37) % 600; }

// Concatenated payloads of sender `sid`, datagrams first .. first+n-1.
std::string streamBytes(uint32_t sid, uint32_t first, uint32_t n) { return e2e::streamBytes(sid, first, n, sizeVaried); }

// Sends datagrams k = from .. to-1 of sender `sid` at `rate`/s (0: flat
// out); *progress counts them.
void sendRange(Sender& tx, uint32_t sid, uint32_t from, uint32_t to, double rate, std::atomic<uint32_t>* progress)
{
    const auto t0 = Clock::now();
    for (uint32_t k = from; k < to; k++) {
        if (rate > 0 && ((k - from) & 7) == 0) {
            auto due = t0 + std::chrono::nanoseconds(static_cast<int64_t>((k - from) * 1e9 / rate));
            if (due > Clock::now())
                std::this_thread::sleep_until(due);
        }
        tx.sendOne(senderId(sid, k), sizeVaried(k));
        progress->store(k + 1 - from, std::memory_order_relaxed);
    }
}

uint64_t fileSize(const std::string& path)
{
    std::error_code ec;
    uint64_t n = fs::file_size(path, ec);
    return ec ? 0 : n;
}

bool waitFor(const std::function<bool()>& done, int ms)
{
    return test::waitUntil(done, std::chrono::milliseconds(ms), 10ms);
}

struct Totals {
    uint64_t sent = 0, toNpf = 0, toKernel = 0, writtenVerified = 0, inFlightAtKill = 0, tornWrites = 0;
    uint64_t bytesVerified = 0;
    uint64_t restartRnr = 0, restartRefused = 0; // restarts under traffic: XDP drop_rnr, engine bad_meta/rejected
};

class KillSoak : public EngineE2E {
protected:
    void startRecv(uint32_t cycle, bool cold)
    {
        out_ = dir_->path + "/out" + std::to_string(cycle);
        err_ = dir_->path + "/err" + std::to_string(cycle);
        std::vector<std::string> a = {NPF_RECV_PATH, rig_->rxIf(), std::to_string(kPort), "-o", out_};
        if (cold)
            a.push_back("--cold");
        outBase_ = 0;
        recv_ = std::make_unique<Child>(rig_->veth().rxNs().path(), a, err_, true);
        ASSERT_TRUE(recv_->ready(std::chrono::milliseconds(kDeadlineMs)));
        if (cycle > 0) {
            ASSERT_NE(readFile(err_).find("taken over"), std::string::npos)
                << "restarted npf-recv did not take the flow over:\n" << readFile(err_);
        }
    }

    // Waits until XDP has seen `n` more packets than `before`; the delta.
    Counters xdpAfter(const Counters& before, uint64_t n)
    {
        Counters d;
        waitFor([&] { return (d = delta(rig_->xdp(), before))["rx_total"] >= n; }, kDeadlineMs);
        return d;
    }

    void cycle(uint32_t c);
    void restartUnderTraffic(uint32_t c);

    std::mt19937_64 rng_;
    std::unique_ptr<Rig> rig_;
    std::unique_ptr<TempDir> dir_;
    std::unique_ptr<KernelSocket> kernel_;
    std::unique_ptr<Child> recv_;
    std::string out_, err_;
    uint64_t outBase_ = 0; // bytes of out_ that earlier parts of the cycle checked already
    Totals t_;
};

void KillSoak::cycle(uint32_t c)
{
    const uint32_t sid = c & 0xff; // ids carry the sender in their top byte
    const uint32_t n = 3000;
    auto u = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_); };
    const uint32_t a = u(100, 1000), b = u(a + 400, n - 300), killAt = u(1, b - a - 1);
    Sender tx(rig_->veth(), {.sender = sid, .dstPort = kPort});
    std::atomic<uint32_t> progress{0};

    // A: the running (from cycle 1 on: restarted) npf-recv gets all of it, in order.
    const Counters x0 = rig_->xdp();
    sendRange(tx, sid, 0, a, rate(), &progress);
    const std::string wantA = streamBytes(sid, 0, a);
    ASSERT_TRUE(waitFor([&] { return fileSize(out_) >= outBase_ + wantA.size(); }, kDeadlineMs))
        << "npf-recv wrote " << fileSize(out_) - outBase_ << " of " << wantA.size() << " bytes of part A\n"
        << readFile(err_);
    Counters dA = xdpAfter(x0, a);
    ASSERT_EQ(dA["rx_total"], a) << describe(dA);
    ASSERT_EQ(dA["redir_primary"] + dA["redir_backup"], a) << "part A not all steered to npf: " << describe(dA);

    // B: killed while it is being sent.
    progress = 0;
    std::string sendError;
    std::thread partB([&] {
        try {
            sendRange(tx, sid, a, b, rate(), &progress);
        } catch (const std::exception& e) {
            sendError = e.what();
        }
        progress = b - a; // done either way: stop waiting for it
    });
    waitFor([&] { return progress.load() >= killAt; }, kDeadlineMs);
    recv_->kill(SIGKILL);
    int st = 0;
    const bool reaped = recv_->wait(kDeadlineMs, &st);
    partB.join();
    ASSERT_EQ(sendError, "");
    ASSERT_TRUE(reaped) << "killed npf-recv did not exit";
    ASSERT_EQ(st, 128 + SIGKILL);

    // C: nobody serves the flow now.
    sendRange(tx, sid, b, n, rate(), &progress);

    const Counters d = xdpAfter(x0, n);
    const uint64_t passed = d.at("pass_no_socket") + d.at("redir_fail");
    const uint64_t steered = d.at("redir_primary") + d.at("redir_backup");
    EXPECT_EQ(d.at("rx_total"), n) << describe(d);
    EXPECT_EQ(steered + passed, n) << "datagrams with another outcome: " << describe(d);
    EXPECT_GE(d.at("pass_no_socket"), n - b) << "part C must reach the kernel: " << describe(d);
    EXPECT_NE(rig_->statusJson().find("\"attached\""), std::string::npos) << "XDP program must survive the kill";
    EXPECT_TRUE(fs::exists(rig_->pinDir())) << "pins must survive the kill";

    // The kernel's part: a contiguous tail [first, n), byte-exact.
    std::vector<std::string> kernel;
    kernel_->receive(&kernel, passed, kDeadlineMs, 50);
    ASSERT_EQ(kernel.size(), passed) << "kernel socket vs XDP passes: " << describe(d);
    const uint32_t first = n - uint32_t(kernel.size());
    for (size_t i = 0; i < kernel.size(); i++) {
        const uint32_t k = first + uint32_t(i);
        const std::vector<uint8_t> want = payloadFor(senderId(sid, k), sizeVaried(k));
        ASSERT_TRUE(kernel[i].size() == want.size() && std::memcmp(kernel[i].data(), want.data(), want.size()) == 0)
            << "kernel datagram #" << i << " is not datagram " << k << " (" << kernel[i].size() << " bytes; in order, "
            << "contiguous, byte-exact expected)";
    }
    EXPECT_EQ(steered, first) << "steered to npf but not the head of the stream: " << describe(d);
    EXPECT_GE(first, a);
    EXPECT_LE(first, b);

    // npf-recv's part: exactly a prefix of the stream, all of A, at most up to
    // the kernel's part. A SIGKILL can cut the write() of the last datagram.
    const std::string got = readFile(out_).substr(outBase_);
    const std::string want = streamBytes(sid, 0, first);
    ASSERT_LE(got.size(), want.size()) << "npf-recv wrote more than the datagrams steered to it";
    ASSERT_TRUE(std::memcmp(got.data(), want.data(), got.size()) == 0)
        << "npf-recv's output is not a prefix of the stream";
    uint32_t m = 0;
    for (size_t bytes = 0; m < first && bytes + sizeVaried(m) <= got.size(); m++)
        bytes += sizeVaried(m);
    EXPECT_GE(m, a);
    const bool torn = got.size() != streamBytes(sid, 0, m).size();

    t_.sent += n;
    t_.toNpf += steered;
    t_.toKernel += kernel.size();
    t_.writtenVerified += m;
    t_.bytesVerified += got.size();
    t_.inFlightAtKill += first - m;
    t_.tornWrites += torn;
    if (c % 10 == 0 || std::getenv("NPF_SOAK_VERBOSE"))
        std::printf("[ cycle %3u] A=%u B=%u..%u (kill after %u) C=%u..%u: npf-recv wrote %u%s, %u in flight at "
                    "SIGKILL, kernel got %zu from %u on\n",
                    c, a, a, b, a + killAt, b, n, m, torn ? " (+ a cut datagram)" : "", first - m, kernel.size(),
                    first);
    fs::remove(out_);
    fs::remove(err_);
}

// D: npf-recv restarts while a stream runs; it goes on for 500 datagrams
// after npf-recv is ready. The kernel gets the head of the stream (until the
// new sockets are bound), npf-recv all of the rest from some datagram y on
// (at the latest the first sent after its ready line), byte-exact; the ones
// in between are counted: XDP drop_rnr (the flow open, no buffer posted yet)
// or steered to the new sockets before the flow was open (engine bad_meta,
// rejected).
void KillSoak::restartUnderTraffic(uint32_t c)
{
    const uint32_t sid = (c + 0x80) & 0xff, after = 500, cap = 1000000;
    Sender tx(rig_->veth(), {.sender = sid, .dstPort = kPort});
    std::atomic<uint32_t> progress{0}, stopAt{cap};
    std::string sendError;
    const Counters x0 = rig_->xdp();
    std::thread d([&] {
        try {
            const auto t0 = Clock::now();
            for (uint32_t k = 0; k < stopAt.load(); k++) {
                if ((k & 7) == 0 && rate() > 0) {
                    auto due = t0 + std::chrono::nanoseconds(static_cast<int64_t>(k * 1e9 / rate()));
                    if (due > Clock::now())
                        std::this_thread::sleep_until(due);
                }
                tx.sendOne(senderId(sid, k), sizeVaried(k));
                progress = k + 1;
            }
        } catch (const std::exception& e) {
            sendError = e.what();
        }
    });
    waitFor([&] { return progress.load() >= 100; }, kDeadlineMs); // traffic first
    startRecv(c, std::bernoulli_distribution(0.5)(rng_));
    const uint32_t ready = progress.load();
    stopAt = ready + after;
    d.join();
    ASSERT_EQ(sendError, "");
    ASSERT_FALSE(HasFatalFailure());
    const uint32_t n = progress.load();
    ASSERT_EQ(n, ready + after) << "sender stopped early";

    const Counters dx = xdpAfter(x0, n);
    const uint64_t passed = dx.at("pass_no_socket") + dx.at("redir_fail");
    const uint64_t steered = dx.at("redir_primary") + dx.at("redir_backup");
    EXPECT_EQ(dx.at("rx_total"), n) << describe(dx);
    EXPECT_EQ(steered + passed + dx.at("drop_rnr"), n) << "datagrams with another outcome: " << describe(dx);

    std::vector<std::string> kernel;
    kernel_->receive(&kernel, passed, kDeadlineMs, 50);
    ASSERT_EQ(kernel.size(), passed) << "kernel socket vs XDP passes: " << describe(dx);
    for (uint32_t k = 0; k < kernel.size(); k++) {
        const std::vector<uint8_t> want = payloadFor(senderId(sid, k), sizeVaried(k));
        ASSERT_TRUE(kernel[k].size() == want.size() && std::memcmp(kernel[k].data(), want.data(), want.size()) == 0)
            << "kernel datagram #" << k << " is not datagram " << k << " of the stream (" << kernel[k].size()
            << " bytes): the kernel must get the head of the stream, in order, byte-exact";
    }

    // npf-recv's part: datagrams y .. n-1, whole, in order.
    std::string got;
    ASSERT_TRUE(waitFor([&] { return fileSize(out_) >= kHeader; }, kDeadlineMs)) << "npf-recv wrote nothing";
    got = readFile(out_);
    uint32_t id;
    std::memcpy(&id, got.data(), 4);
    ASSERT_EQ(id >> 24, sid) << "npf-recv's first datagram is not of this stream";
    const uint32_t y = id & 0xffffff;
    // Datagram `ready` may have left before the ready line (the sender counts
    // it after send() returns); every later one left after it.
    ASSERT_LE(y, ready + 1) << "npf-recv missed datagrams sent after it was ready";
    ASSERT_GE(y, kernel.size());
    const std::string want = streamBytes(sid, y, n - y);
    waitFor([&] { return fileSize(out_) >= want.size(); }, kDeadlineMs);
    got = readFile(out_);
    EXPECT_EQ(got.size(), want.size()) << "npf-recv wrote datagrams " << y << " .. of " << n;
    EXPECT_TRUE(got == want) << "npf-recv's output is not datagrams " << y << " .. " << n - 1 << " of the stream";

    // The gap: counted by XDP or by the engine, none silently gone.
    const uint64_t gap = y - kernel.size(), refused = steered - (n - y);
    EXPECT_GE(steered, n - y);
    EXPECT_EQ(gap, dx.at("drop_rnr") + refused) << describe(dx);
    Counters eng;
    const bool counted = waitFor(
        [&] {
            eng = rig_->engineSnapshot();
            return eng["bad_meta"] + eng["rejected"] + eng["mismatch"] >= refused;
        },
        kDeadlineMs);
    EXPECT_TRUE(counted && eng["bad_meta"] + eng["rejected"] + eng["mismatch"] == refused)
        << refused << " datagrams steered to the restarted npf-recv before its flow was open; the engine counted "
        << describe(eng);
    t_.sent += n;
    t_.toKernel += kernel.size();
    t_.toNpf += steered;
    t_.writtenVerified += n - y;
    t_.bytesVerified += got.size();
    t_.restartRnr += dx.at("drop_rnr");
    t_.restartRefused += refused;
    if (c % 10 == 0 || std::getenv("NPF_SOAK_VERBOSE"))
        std::printf("[restart %3u] under traffic: %u datagrams, kernel got the first %zu, drop_rnr %llu, refused %llu "
                    "(engine: bad_meta %llu, rejected %llu), npf-recv wrote %u..%u\n",
                    c, n, kernel.size(), (unsigned long long)dx.at("drop_rnr"), (unsigned long long)refused,
                    (unsigned long long)eng["bad_meta"], (unsigned long long)eng["rejected"], y, n - 1);
    outBase_ = got.size();
}

TEST_F(KillSoak, NpfRecvKilledMidStreamAndRestarted)
{
    const uint32_t cycles = uint32_t(envOr("NPF_SOAK_CYCLES", 100));
    const uint64_t seed = envOr("NPF_SOAK_SEED", 0x6b696c6c);
    std::printf("npf-recv kill soak: %u cycles, seed 0x%llx (NPF_SOAK_CYCLES, NPF_SOAK_SEED)\n", cycles,
                static_cast<unsigned long long>(seed));
    rng_.seed(seed);
    const auto t0 = Clock::now();
    std::string pins, netns[2];
    {
        rig_ = std::make_unique<Rig>();
        dir_ = std::make_unique<TempDir>();
        kernel_ = std::make_unique<KernelSocket>(*rig_, kPort);
        pins = rig_->pinDir();
        netns[0] = rig_->veth().rxNs().path();
        netns[1] = rig_->veth().txNs().path();

        uint32_t c = 0;
        ASSERT_NO_FATAL_FAILURE(startRecv(0, true));
        for (; c < cycles && !HasFailure(); c++) {
            SCOPED_TRACE("cycle " + std::to_string(c));
            cycle(c);
            if (HasFailure())
                break;
            // Restart, cold or warm, under traffic: it must take the flow over.
            ASSERT_NO_FATAL_FAILURE(restartUnderTraffic(c + 1));
        }
        ASSERT_FALSE(HasFailure()) << "failed in cycle " << c;

        // A last stream, whole, to the last restarted npf-recv; then a clean exit.
        const uint32_t n = 2000, sid = 0xee;
        Sender tx(rig_->veth(), {.sender = sid, .dstPort = kPort});
        std::atomic<uint32_t> progress{0};
        const Counters x0 = rig_->xdp();
        sendRange(tx, sid, 0, n, rate(), &progress);
        const std::string want = streamBytes(sid, 0, n);
        EXPECT_TRUE(waitFor([&] { return fileSize(out_) >= outBase_ + want.size(); }, kDeadlineMs));
        recv_->kill(SIGTERM);
        int st = -1;
        ASSERT_TRUE(recv_->wait(kDeadlineMs, &st));
        EXPECT_EQ(st, 0) << readFile(err_);
        EXPECT_TRUE(readFile(out_).substr(outBase_) == want) << "last npf-recv's output differs from its stream";
        Counters d = xdpAfter(x0, n);
        EXPECT_EQ(d["redir_primary"] + d["redir_backup"], n) << describe(d);
        std::vector<std::string> leaked;
        kernel_->receive(&leaked, 0, 0, 100);
        EXPECT_EQ(leaked.size(), 0u) << "the last stream leaked to the kernel stack";
        t_.sent += n;
        t_.toNpf += n;
        t_.writtenVerified += n;
        t_.bytesVerified += want.size();

        // The engines' snapshots: the killed ones left theirs, the last one's clean exit removes it.
        const std::string run = rig_->runDir();
        std::string left;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(run, ec))
            left += e.path().filename().string() + " ";
        EXPECT_FALSE(fs::exists(run)) << run << " left after npf-recv's clean exit: " << left;

        int rc = -1;
        rig_->npfctl("detach --force " + rig_->rxIf(), &rc);
        EXPECT_EQ(rc, 0);
        EXPECT_FALSE(fs::exists(pins)) << "detach --force must remove the pins";
        recv_.reset();
        kernel_.reset();
        rig_.reset();
    }
    EXPECT_FALSE(fs::exists(pins)) << pins;
    EXPECT_FALSE(fs::exists(netns[0])) << netns[0];
    EXPECT_FALSE(fs::exists(netns[1])) << netns[1];

    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("[ numbers  ] kill soak: %u cycles in %.0f s; %llu datagrams sent, %llu steered to npf, %llu passed "
                "to the kernel (all byte-exact, in order); npf-recv output verified: %llu datagrams, %llu bytes "
                "(%llu cut by SIGKILL mid-write); %llu in flight at SIGKILL; restarts under traffic: %llu drop_rnr, "
                "%llu refused by the engine before the flow was open\n",
                cycles, secs, (unsigned long long)t_.sent, (unsigned long long)t_.toNpf,
                (unsigned long long)t_.toKernel, (unsigned long long)t_.writtenVerified,
                (unsigned long long)t_.bytesVerified, (unsigned long long)t_.tornWrites,
                (unsigned long long)t_.inFlightAtKill, (unsigned long long)t_.restartRnr,
                (unsigned long long)t_.restartRefused);
}

} // namespace
} // namespace npf::e2e
