// A flow driven from an event loop: epoll on Flow::eventFd() with arm(),
// never wait(); completions carry the cookie given with the post; wait()
// tells a timeout from a gone interface; closeFlow hands the port back to
// the kernel and lifts the protection of the buffers it leaves behind.
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "engine_fixture.h"
#include "sys/fd.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kPort = 7400;
constexpr uint32_t kBuf = 2048;
uint32_t size300(uint32_t) { return 300; }

// An epoll loop over one flow: poll until empty, arm, sleep in epoll_wait.
// Each buffer goes back to the flow as soon as its completion is checked.
struct EpollReceiver {
    Engine& eng;
    Flow& flow;
    uint32_t slots;
    Fd ep{::epoll_create1(EPOLL_CLOEXEC)};
    std::atomic<uint64_t> done{0};
    uint64_t ok = 0, wrongCookie = 0, wrongBytes = 0, otherStatus = 0;
    uint64_t sleeps = 0, emptyWakeups = 0;
    int error = 0;

    EpollReceiver(Engine& e, Flow& f, uint32_t n) : eng(e), flow(f), slots(n)
    {
        epoll_event ev{};
        ev.events = EPOLLIN;
        if (!ep || ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, flow.eventFd(), &ev) != 0)
            throw std::system_error(errno, std::generic_category(), "epoll on the flow's event fd");
        for (uint32_t i = 0; i < slots; i++)
            if (!flow.post(uint64_t(i) * kBuf, kBuf, 1000 + i))
                throw std::runtime_error("post refused");
    }

    void consume(const npf_completion& c)
    {
        const uint64_t slot = c.offset / kBuf;
        if (c.cookie != 1000 + slot)
            wrongCookie++;
        if (c.status != NPF_CS_OK) {
            otherStatus++;
        } else {
            ok++;
            const std::vector<uint8_t> want = payloadFor(senderId(0, uint32_t(c.seq)), 300);
            if (c.len != want.size() || std::memcmp(eng.region() + c.offset, want.data(), want.size()) != 0)
                wrongBytes++;
        }
        eng.release(c.offset, kBuf);
        if (!flow.post(c.offset, kBuf, c.cookie))
            otherStatus++;
    }

    // Runs until `count` completions or the deadline; never calls wait().
    void run(uint64_t count)
    {
        const auto end = std::chrono::steady_clock::now() + test::kDeadline;
        npf_completion c[128];
        bool woke = false;
        while (done.load() < count && std::chrono::steady_clock::now() < end) {
            int n;
            bool got = false;
            while ((n = flow.poll(c)) > 0) {
                for (int i = 0; i < n; i++)
                    consume(c[i]);
                got = true;
                done.fetch_add(uint64_t(n));
            }
            if (woke && !got)
                emptyWakeups++;
            woke = false;
            if (n < 0 || (n = flow.arm()) < 0) {
                error = n;
                return;
            }
            if (n > 0)
                continue; // ready already: not armed
            epoll_event ev;
            sleeps++;
            // Asleep until the signal or the deadline: a lost wake-up is a
            // sleep into the deadline, not a slower run.
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            woke = ::epoll_wait(ep.get(), &ev, 1, int(std::max<int64_t>(left.count(), 0))) == 1;
        }
    }
};

// This process's threads: tid -> name.
std::map<std::string, std::string> threadNames()
{
    std::map<std::string, std::string> out;
    for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
        std::string comm = readFile(t.path().string() + "/comm");
        if (!comm.empty() && comm.back() == '\n')
            comm.pop_back();
        out[t.path().filename().string()] = comm;
    }
    return out;
}

// 100,000 datagrams, flow-controlled below the posted buffers, into a cold
// region, received by a loop that only sleeps in epoll_wait: every one
// completes OK, byte for byte, with its buffer's cookie, and the flow's own
// accounting agrees. A lost wake-up leaves the loop asleep with datagrams
// ready: it then runs into the deadline short of the count.
void epollOnly(const EngineConfig& cfg)
{
    constexpr uint32_t kCount = 100000, kSlots = 1024;
    Rig rig;
    EngineInNs eng(rig, cfg);
    Flow& flow = eng->openFlow(kPort);
    EpollReceiver rx(*eng, flow, kSlots);
    Sender tx(rig.veth(), {.sender = 0, .count = kCount, .dstPort = kPort, .size = size300});
    tx.flowControl(kSlots / 2, [&] { return rx.done.load(); });
    tx.start();
    rx.run(kCount);
    tx.join();
    ASSERT_EQ(tx.error(), "");
    EXPECT_EQ(rx.error, 0) << flow.failure();
    EXPECT_EQ(rx.done.load(), kCount) << "the epoll loop stalled after " << rx.done.load() << " completions ("
                                      << rx.sleeps << " sleeps): a wake-up was lost";
    EXPECT_EQ(rx.ok, kCount);
    EXPECT_EQ(rx.otherStatus, 0u);
    EXPECT_EQ(rx.wrongCookie, 0u);
    EXPECT_EQ(rx.wrongBytes, 0u);
    // Not a busy loop: a sleep that woke to nothing is a rare race (a signal
    // sent just before an arm that then found entries), not the rule.
    EXPECT_LT(rx.emptyWakeups, rx.sleeps / 10 + 10) << rx.sleeps << " sleeps";
    const FlowStats f = flow.stats();
    EXPECT_EQ(f.reached(), kCount) << describe(rig.xdp());
    EXPECT_EQ(f.completed(), kCount);
    EXPECT_EQ(f.completedOk, kCount);
}

TEST_F(EngineE2E, EpollOnlyReceiverGetsEveryDatagram) { epollOnly({.regionSize = 16ull << 20}); }

// Run to completion: no worker thread; the loop's own poll() and arm() run
// the fast path, and the event fd also wakes it for datagrams waiting in the
// queue's socket (else it sleeps into the deadline with them there).
TEST_F(EngineE2E, EpollOnlyReceiverRunningToCompletionGetsEveryDatagram)
{
    {
        // The engine's threads name themselves once running (npf-pager,
        // npf-barrier, npf-worker-q): wait until each new one has, then see
        // which there are.
        const std::map<std::string, std::string> before = threadNames();
        const std::string unnamed = before.at(std::to_string(getpid())); // what a new thread is called until it names itself
        Rig rig;
        EngineInNs eng(rig, {.regionSize = 16ull << 20, .runToCompletion = true});
        std::multiset<std::string> added;
        EXPECT_TRUE(test::waitUntil([&] {
            added.clear();
            for (const auto& [tid, name] : threadNames())
                if (!before.contains(tid))
                    added.insert(name);
            return added.contains("npf-pager") && !added.contains(unnamed);
        })) << "the engine's threads did not all name themselves";
        EXPECT_EQ(added.count("npf-pager"), 1u) << "the fault path keeps its pager";
        for (const std::string& name : added)
            EXPECT_FALSE(name.starts_with("npf-worker")) << "a worker thread runs the fast path: " << name;
    }
    epollOnly({.regionSize = 16ull << 20, .runToCompletion = true});
}

// The event fd wakes an armed loop when the interface goes, and poll(),
// arm() and wait() then say -ENODEV; before that, wait() with nothing coming
// returns 0 (a timeout), not an error.
TEST_F(EngineE2E, EventFdWakesOnInterfaceLossAndWaitTellsTimeoutFromFailure)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 4ull << 20});
    Flow& flow = eng->openFlow(kPort);
    ASSERT_TRUE(flow.post(0, kBuf));
    npf_completion c[4];
    EXPECT_EQ(flow.wait(c, 20ms), 0) << "a timeout is 0";
    EXPECT_EQ(flow.poll(c), 0);
    ASSERT_EQ(flow.arm(), 0);

    Fd ep(::epoll_create1(EPOLL_CLOEXEC));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ASSERT_EQ(::epoll_ctl(ep.get(), EPOLL_CTL_ADD, flow.eventFd(), &ev), 0);
    EXPECT_EQ(::epoll_wait(ep.get(), &ev, 1, 0), 0) << "armed with nothing ready: not readable";
    ASSERT_EQ(test::sh(rig.veth().rxNs().exec() + "ip link del " + rig.rxIf()), 0);
    EXPECT_EQ(::epoll_wait(ep.get(), &ev, 1, int(test::kDeadline.count())), 1) << "no wake-up for the loss";
    EXPECT_TRUE(test::waitUntil([&] { return flow.poll(c) == -ENODEV; })) << flow.failure();
    EXPECT_EQ(flow.arm(), -ENODEV);
    EXPECT_EQ(flow.wait(c, 20s), -ENODEV);
    EXPECT_NE(flow.failure(), "");
}

// closeFlow: the port's datagrams pass to the kernel again, the pages of the
// buffers left posted can be evicted, and the port can be opened again.
TEST_F(EngineE2E, CloseFlowHandsThePortBackAndUnprotectsItsBuffers)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 4ull << 20});
    Flow& flow = eng->openFlow(kPort);
    for (uint32_t i = 0; i < 64; i++)
        ASSERT_TRUE(flow.post(uint64_t(i) * kBuf, kBuf));
    flow.flush();
    ASSERT_EQ(eng->populate(0, 64 * kBuf), 64u * kBuf / 4096);
    EXPECT_EQ(eng->evictAll(), 0u) << "posted buffers are protected from eviction";
    eng->closeFlow(flow);
    EXPECT_EQ(eng->evictAll(), 64u * kBuf / 4096) << "closeFlow left its buffers protected";

    KernelSocket sock(rig, kPort);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = 1, .dstPort = kPort, .size = size300}), "");
    std::vector<std::string> got;
    sock.receive(&got, 1, int(test::kDeadline.count()), 0);
    EXPECT_EQ(got.size(), 1u) << "the closed flow's datagram did not pass to the kernel";

    Flow& again = eng->openFlow(kPort);
    ASSERT_TRUE(again.post(0, kBuf, 7));
    again.flush();
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = 1, .dstPort = kPort, .size = size300}), "");
    npf_completion c[1];
    EXPECT_EQ(again.wait(c, test::kDeadline), 1) << "the port opened again receives nothing";
    EXPECT_EQ(c[0].cookie, 7u);
}

} // namespace
} // namespace npf::e2e
