#include "order/completion_ring.h"
#include "../common/wait.h" // header-only; this suite does not link npf_testcommon
#include "sys/error.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace npf::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

npf_completion entry(uint64_t seq)
{
    return {seq, seq * 4096, static_cast<uint32_t>(seq % 1500), static_cast<uint16_t>(seq % 3),
            static_cast<uint16_t>(seq % 2)};
}

bool same(const npf_completion& a, const npf_completion& b)
{
    return a.seq == b.seq && a.offset == b.offset && a.len == b.len && a.status == b.status &&
           a.flags == b.flags;
}

// A second, independent mapping of the same ring (what a client process gets).
CompletionRing attachCopy(const CompletionRing& r)
{
    return CompletionRing::attach(Fd(::dup(r.memfd())), Fd(::dup(r.notifyFd())), "copy");
}

Fd pipeReadEnd()
{
    int p[2];
    checkErrno(::pipe2(p, O_CLOEXEC), "pipe");
    ::close(p[1]);
    return Fd(p[0]);
}

// A ring with both sides on one mapping.
struct Ends {
    CompletionRing ring;
    CompletionProducer prod{ring};
    CompletionConsumer cons{ring};
};

TEST(CompletionRing, CreateRejectsBadSizes)
{
    for (uint32_t n : {0u, 1u, 3u, 1000u})
        EXPECT_THROW(CompletionRing::create(n, "bad"), std::system_error) << n;
}

TEST(CompletionRing, FifoAcrossManyWraps)
{
    Ends r{CompletionRing::create(8, "fifo")};
    std::vector<npf_completion> out(8);
    uint64_t next = 0, want = 0;
    for (int round = 0; round < 1000; ++round) {
        const size_t k = 1 + round % 8;
        std::vector<npf_completion> b;
        for (size_t i = 0; i < k; ++i)
            b.push_back(entry(next++));
        ASSERT_EQ(r.prod.write(b), k);
        ASSERT_EQ(r.cons.ready(), k);
        ASSERT_EQ(r.cons.poll(out.size(), out.data()), k);
        for (size_t i = 0; i < k; ++i)
            ASSERT_TRUE(same(out[i], entry(want++)));
    }
    EXPECT_EQ(r.prod.stats().pushed, next);
    EXPECT_EQ(r.prod.stats().full, 0u);
}

TEST(CompletionRing, FullRingReportsBackPressureAndNeverOverwrites)
{
    Ends r{CompletionRing::create(16, "full")};
    for (uint64_t i = 0; i < 16; ++i)
        ASSERT_TRUE(r.prod.push(entry(i)));
    EXPECT_EQ(r.prod.room(), 0u);
    EXPECT_FALSE(r.prod.push(entry(16)));
    std::vector<npf_completion> b = {entry(16), entry(17), entry(18)};
    npf_completion out[16];
    ASSERT_EQ(r.cons.poll(2, out), 2u);
    EXPECT_EQ(r.prod.write(b), 2u); // partial: only what fits
    EXPECT_EQ(r.prod.stats().full, 2u);
    ASSERT_EQ(r.cons.poll(16, out), 16u);
    for (uint64_t i = 0; i < 16; ++i)
        EXPECT_TRUE(same(out[i], entry(i + 2))) << i;
}

TEST(CompletionRing, SecondMappingSeesEntriesAndCursors)
{
    CompletionRing mine = CompletionRing::create(64, "two");
    CompletionRing theirs = attachCopy(mine);
    CompletionProducer prod(mine);
    CompletionConsumer cons(theirs);
    EXPECT_EQ(theirs.size(), 64u);
    for (uint64_t i = 0; i < 100; ++i) {
        ASSERT_TRUE(prod.push(entry(i)));
        npf_completion c;
        ASSERT_EQ(cons.poll(1, &c), 1u);
        ASSERT_TRUE(same(c, entry(i)));
    }
    for (uint64_t i = 0; i < 64; ++i)
        ASSERT_TRUE(prod.push(entry(i)));
    EXPECT_FALSE(prod.push(entry(64))); // consumer's cursor is read through the other mapping
}

TEST(CompletionRing, NoWakeupWhenConsumerIsNotWaiting)
{
    Ends r{CompletionRing::create(2048, "nowake")};
    for (uint64_t i = 0; i < 1000; ++i)
        ASSERT_TRUE(r.prod.push(entry(i)));
    EXPECT_EQ(r.prod.stats().wakeups, 0u);
    EXPECT_EQ(r.cons.wait(1000ms), 1000); // ready already: returns at once
}

// A publisher that appends several batches wakes an armed consumer once,
// after the last (append() alone signals nothing), and the consumer then
// finds every entry.
TEST(CompletionRing, AppendsThenOneWakeup)
{
    Ends r{CompletionRing::create(256, "append")};
    ASSERT_EQ(r.cons.arm(), 0); // armed: asleep on the notifier from here
    uint64_t seq = 0;
    for (int batch = 0; batch < 3; ++batch) {
        npf_completion e[64];
        for (auto& c : e)
            c = entry(seq++);
        ASSERT_EQ(r.prod.append(e), 64u);
        pollfd p{r.cons.notifyFd(), POLLIN, 0};
        ASSERT_EQ(::poll(&p, 1, 0), 0) << "append() signalled, batch " << batch;
    }
    r.prod.wakeIfWaiting();
    r.prod.wakeIfWaiting(); // no longer waiting: nothing more
    EXPECT_EQ(r.prod.stats().wakeups, 1u);
    pollfd p{r.cons.notifyFd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 1000), 1);
    npf_completion out[256];
    ASSERT_EQ(r.cons.poll(256, out), 192u);
    for (uint64_t i = 0; i < 192; ++i)
        EXPECT_TRUE(same(out[i], entry(i))) << i;
}

TEST(CompletionRing, WaitTimesOut)
{
    Ends r{CompletionRing::create(8, "timeout")};
    const auto t0 = Clock::now();
    EXPECT_EQ(r.cons.wait(30ms), 0);
    const auto took = Clock::now() - t0;
    EXPECT_GE(took, 30ms);
    EXPECT_LT(took, kDeadline) << "the wait never timed out"; // that it does, not how precisely
    EXPECT_FALSE(r.prod.consumerWaiting());
}

// The consumer is another process that attached the ring from its fds and
// sleeps on the notifier; the producer pushes once it sees it waiting.
TEST(CompletionRing, ForkedConsumerBlocksAndIsWoken)
{
    CompletionRing ring = CompletionRing::create(64, "fork");
    CompletionProducer prod(ring);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int code = 0;
        try {
            CompletionRing theirs = attachCopy(ring);
            CompletionConsumer cons(theirs);
            const int n = cons.wait(kDeadline);
            npf_completion c[4];
            if (n != 3 || cons.poll(4, c) != 3)
                code = 2;
            for (uint64_t i = 0; code == 0 && i < 3; ++i)
                if (!same(c[i], entry(i)))
                    code = 3;
        } catch (...) {
            code = 4;
        }
        ::_exit(code);
    }
    EXPECT_TRUE(waitUntil([&] { return prod.consumerWaiting(); }));
    std::vector<npf_completion> b = {entry(0), entry(1), entry(2)};
    EXPECT_EQ(prod.write(b), 3u);
    EXPECT_EQ(prod.stats().wakeups, 1u);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: not woken with the 3 entries before its kDeadline wait timed out";
}

// Ping-pong: the producer pushes one entry, then waits until it is consumed,
// so every push races with the consumer going to sleep and nothing later
// would paper over a missed signal. A lost wakeup is a wait() that times out
// although the entry was pushed (and signalled) before the first half of the
// wait was over: the consumer slept on through seconds with an entry ready.
// A timeout with nothing pending, or with an entry pushed late in the wait (a
// producer descheduled that long), is no evidence and the consumer waits
// again; nothing here depends on how fast either side runs.
void raceWakeups(CompletionProducer& prod, CompletionConsumer& cons)
{
    constexpr uint64_t kItems = 50'000;
    constexpr auto kWait = 10s;
    std::atomic<uint64_t> consumed{0}, timeouts{0}, lost{0}, bad{0};
    std::atomic<bool> stop{false};
    // When entry pushedIdx was pushed (after push() returned: its signal is out).
    std::atomic<int64_t> pushedNs{0};
    std::atomic<uint64_t> pushedIdx{~0ull};
    auto ns = [](Clock::time_point t) { return t.time_since_epoch() / 1ns; };
    std::thread consumer([&] {
        npf_completion buf[4];
        while (consumed.load() < kItems) {
            const auto t0 = Clock::now();
            const int rc = cons.wait(kWait);
            if (rc < 0) {
                ADD_FAILURE() << "wait: " << strerror(-rc);
                break;
            }
            if (rc == 0) {
                timeouts.fetch_add(1);
                const auto mid = ns(t0 + (Clock::now() - t0) / 2);
                if (cons.ready() > 0 && pushedIdx.load() == consumed.load() && pushedNs.load() <= mid) {
                    lost.fetch_add(1);
                    break;
                }
                continue;
            }
            const size_t n = cons.poll(4, buf);
            for (size_t i = 0; i < n; ++i)
                if (!same(buf[i], entry(consumed.load() + i)))
                    bad.fetch_add(1);
            consumed.fetch_add(n);
        }
        stop = true;
    });
    std::minstd_rand rng(7);
    for (uint64_t i = 0; i < kItems && !stop.load(); ++i) {
        for (unsigned spin = rng() % 8; spin; --spin) // vary where the push lands
            asm volatile("pause" ::: "memory");
        EXPECT_TRUE(prod.push(entry(i)));
        pushedNs.store(ns(Clock::now()));
        pushedIdx.store(i);
        for (unsigned k = 0; consumed.load() <= i && !stop.load(); ++k)
            if (k > 1000)
                std::this_thread::yield();
    }
    consumer.join();
    EXPECT_EQ(lost.load(), 0u) << "a wait() slept on with an entry ready: lost wakeup";
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_EQ(consumed.load(), kItems);
    EXPECT_GT(prod.stats().wakeups, 0u); // the consumer did sleep
    std::printf("[ info ] %llu ping-pongs, %llu notifier wakeups, %llu waits timed out without evidence\n",
                static_cast<unsigned long long>(kItems), static_cast<unsigned long long>(prod.stats().wakeups),
                static_cast<unsigned long long>(timeouts.load() - lost.load()));
}

TEST(CompletionRing, NoLostWakeupsTwoMappings)
{
    CompletionRing mine = CompletionRing::create(256, "race2");
    CompletionRing theirs = attachCopy(mine);
    CompletionProducer prod(mine);
    CompletionConsumer cons(theirs);
    raceWakeups(prod, cons);
}

TEST(CompletionRing, NoLostWakeupsOneMappingTwoThreads)
{
    Ends r{CompletionRing::create(256, "race1")};
    raceWakeups(r.prod, r.cons);
}

TEST(CompletionRing, AttachRejectsWhatIsNotARing)
{
    Fd small(::memfd_create("small", MFD_CLOEXEC));
    ASSERT_TRUE(small);
    ASSERT_EQ(::ftruncate(small.get(), 100), 0);
    EXPECT_THROW(CompletionRing::attach(std::move(small), pipeReadEnd(), "small"),
                 std::system_error);

    // A header that claims more entries than the file holds.
    Fd liar(::memfd_create("liar", MFD_CLOEXEC));
    ASSERT_TRUE(liar);
    ASSERT_EQ(::ftruncate(liar.get(), 4096), 0);
    npf_completion_ring h{};
    h.size = 1u << 20;
    h.magic = NPF_RING_MAGIC;
    h.version = NPF_RING_LAYOUT_VERSION;
    ASSERT_EQ(::pwrite(liar.get(), &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
    EXPECT_THROW(CompletionRing::attach(std::move(liar), pipeReadEnd(), "liar"),
                 std::system_error);

    // A ring of another layout version, and a file without the magic.
    for (auto [magic, version] : {std::pair{NPF_RING_MAGIC, NPF_RING_LAYOUT_VERSION + 1},
                                  std::pair{0, NPF_RING_LAYOUT_VERSION}}) {
        Fd other(::memfd_create("other", MFD_CLOEXEC));
        ASSERT_TRUE(other);
        ASSERT_EQ(::ftruncate(other.get(), 4096), 0);
        h.size = 64;
        h.magic = static_cast<__u32>(magic);
        h.version = static_cast<__u32>(version);
        ASSERT_EQ(::pwrite(other.get(), &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
        EXPECT_THROW(CompletionRing::attach(std::move(other), pipeReadEnd(), "other"), std::system_error)
            << "magic " << magic << " version " << version;
    }
}

// The notifier must be a pipe's read end: an eventfd (whose file status
// flags the other side shares) or a write end is refused.
TEST(CompletionRing, AttachRefusesANotifierThatIsNotAPipesReadEnd)
{
    CompletionRing r = CompletionRing::create(64, "notifier");
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    Fd rd(p[0]), wr(p[1]);
    for (auto [name, fd] : {std::pair{"eventfd", ::eventfd(0, EFD_CLOEXEC)}, std::pair{"write end", ::dup(wr.get())}}) {
        try {
            CompletionRing::attach(Fd(::dup(r.memfd())), Fd(fd), "bad");
            ADD_FAILURE() << name << " accepted as the notifier";
        } catch (const std::system_error& e) {
            EXPECT_NE(std::string(e.what()).find("not the read end of a pipe"), std::string::npos) << e.what();
        }
    }
}

// A hostile consumer (another process: an npfd client) holds the notifier's
// read end, makes it blocking (the flag is shared with whoever holds that
// end) and never drains it. The producer's signals still never block: its
// write end is its own, non-blocking, and a full pipe drops the signal.
TEST(CompletionRing, AConsumerThatNeverDrainsCannotBlockTheProducer)
{
    CompletionRing ring = CompletionRing::create(64, "hostile");
    CompletionProducer prod(ring);
    CompletionRing theirs = attachCopy(ring);
    const int fl = ::fcntl(theirs.notifyFd(), F_GETFL);
    ASSERT_EQ(::fcntl(theirs.notifyFd(), F_SETFL, fl & ~O_NONBLOCK), 0);
    const uint64_t v = 0xfffffffffffffffeull;
    EXPECT_LT(::write(theirs.notifyFd(), &v, sizeof(v)), 0) << "the consumer's end is read-only";
    for (int i = 0; i < 100000; ++i) // far more than a pipe holds
        prod.wake();
    MmapArea raw = MmapArea::map(CompletionRing::mappingSize(64), PROT_READ | PROT_WRITE, MAP_SHARED,
                                 theirs.memfd(), 0, "raw");
    CompletionConsumer cons(theirs);
    npf_completion c;
    for (uint64_t i = 0; i < 10000; ++i) {
        raw.as<npf_completion_ring>()->waiting = 1; // "I sleep": every push signals
        ASSERT_TRUE(prod.push(entry(i)));
        ASSERT_EQ(cons.poll(1, &c), 1u);
    }
    pollfd p{theirs.notifyFd(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 1) << "a consumer that drains its notifier is woken";
}

TEST(CompletionRing, SealedAgainstResize)
{
    CompletionRing r = CompletionRing::create(64, "seal");
    EXPECT_NE(::ftruncate(r.memfd(), 0), 0);
    EXPECT_EQ(errno, EPERM);
}

// A client that scribbles its cursor cannot make the producer write out of
// place or lose entries silently: the producer sees no room and counts it.
TEST(CompletionRing, CorruptConsumerCursorStopsTheProducer)
{
    CompletionRing ring = CompletionRing::create(16, "corrupt");
    CompletionProducer prod(ring);
    ASSERT_TRUE(prod.push(entry(0)));
    MmapArea raw = MmapArea::map(CompletionRing::mappingSize(16), PROT_READ | PROT_WRITE, MAP_SHARED,
                                 ring.memfd(), 0, "raw");
    auto* h = raw.as<npf_completion_ring>();
    h->cons = 1000;
    EXPECT_EQ(prod.room(), 0u);
    EXPECT_FALSE(prod.push(entry(1)));
    EXPECT_GT(prod.stats().badCons, 0u);
    h->cons = 0;
    h->prod = 99; // and a producer cursor out of range, seen by a consumer
    CompletionRing theirs = attachCopy(ring);
    CompletionConsumer cons(theirs);
    npf_completion c;
    EXPECT_EQ(cons.poll(1, &c), 0u);
    EXPECT_EQ(cons.wait(0ms), -EPROTO);
    EXPECT_GT(cons.badProd(), 0u);
}

} // namespace
} // namespace npf::test
