// A region that adopts a client's memory (npfd): a real second process owns
// the memfd and its own userfaultfd, and the region serves both mappings.
// The invariant throughout: no access to a page whose content was saved, by
// either side, ever reads a silently allocated zero page.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <system_error>

#include "client_process.h"
#include "region_fixture.h"
#include "sys/latency_histogram.h"
#include "wait.h"

namespace npf::test {
namespace {

using namespace std::chrono_literals;

// A client that cannot get a user-mode userfaultfd skips; anything else it
// fails on is a failure.
#define NPF_REQUIRE_CLIENT(c)                                                                        \
    do {                                                                                             \
        const std::string& e_ = (c).error();                                                         \
        if (e_.find("userfaultfd") != std::string::npos || e_.find("UFFDIO_API") != std::string::npos) \
            GTEST_SKIP() << "client: " << e_;                                                        \
        ASSERT_EQ(e_, "") << "client setup";                                                         \
    } while (0)

RegionConfig clientConfig(uint64_t size = ClientSpec{}.size)
{
    RegionConfig c = smallConfig(size);
    c.name = "npf-test-client-region";
    // A deadline no loaded machine misses, nor takes half of (a slow job
    // would send the next 100 ms of pages through the region's mapping):
    // the tests about deadlines set their own.
    c.clientInstallWait = std::chrono::seconds(10);
    return c;
}

// Waits for a condition another thread or process makes true: a counter,
// never a sleep standing in for one.
template <typename P>
bool waitFor(P pred, std::chrono::seconds limit = 10s)
{
    auto until = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > until)
            return false;
        std::this_thread::yield();
    }
    return true;
}

// Reads present pages through the region's own mapping (as a worker
// writes them). A page missing there raises SIGBUS (the mapping's
// userfaultfd is in SIGBUS mode): a failure, not a crash.
std::vector<uint8_t> daemonRead(const Region& r, uint64_t off, uint64_t len)
{
    std::vector<uint8_t> v(len);
    uintptr_t at = 0;
    if (!guarded(r.base() + off, len, [&] { std::memcpy(v.data(), r.base() + off, len); }, &at))
        ADD_FAILURE() << "page " << (at - reinterpret_cast<uintptr_t>(r.base())) / kPg
                      << " is not in the region's own mapping";
    return v;
}

std::vector<uint8_t> withPatch(std::vector<uint8_t> page, size_t at, const std::vector<uint8_t>& p)
{
    std::memcpy(&page[at], p.data(), p.size());
    return page;
}

struct ClientCase {
    const char* name;
    bool dropPrivileges; // the client runs as nobody (65534)
    bool writeProtect;   // the client registers WP too
};

class RegionClientAs : public ::testing::TestWithParam<ClientCase> {};

TEST_P(RegionClientAs, ZerosPatchesAndSavedContentReachBothSides)
{
    NPF_REQUIRE_UFFD();
    ClientSpec spec;
    spec.dropPrivileges = GetParam().dropPrivileges;
    spec.writeProtect = GetParam().writeProtect;
    ClientProcess c(spec);
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    ASSERT_TRUE(r.adopted());
    ASSERT_GE(r.clientUffdFd(), 0);
    EXPECT_EQ(r.clientWriteProtect(), r.writeProtectFence() && spec.writeProtect);
    PagerThread pager(r);

    // A page nobody touched: the client reads zeros the region installed.
    auto z = c.read(7 * kPg, kPg);
    ASSERT_EQ(z.size(), kPg);
    EXPECT_TRUE(allZero(z.data(), kPg));
    pager.sync();
    RegionStats s = r.stats();
    EXPECT_EQ(s.clientFaults, 1u);
    EXPECT_EQ(s.pagesInstalled, 1u);
    EXPECT_TRUE(r.isResident(7 * kPg, kPg));
    EXPECT_EQ(memfdBytes(r), kPg);

    // A packet patch reaches the client with no fault at all.
    auto payload = randomBytes(1000, 1);
    Patch ps[] = {{20 * kPg + 100, payload.data(), 1000}};
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    EXPECT_EQ(c.read(20 * kPg + 100, 1000), payload);
    EXPECT_EQ(r.stats().clientFaults, 1u);

    // The client's own writes land in pages the region installed, and the
    // daemon sees them without faulting.
    ASSERT_TRUE(c.fill(30 * kPg, 2 * kPg, 2));
    pager.sync();
    auto mine = randomBytes(2 * kPg, 2);
    EXPECT_EQ(std::memcmp(r.base() + 30 * kPg, mine.data(), 2 * kPg), 0);
    EXPECT_EQ(r.stats().clientFaults, 3u);
    EXPECT_EQ(r.stats().cpuFaults, 0u);

    // Evicted with saving, then read by the client: restored, never zeros.
    ASSERT_EQ(r.evictAll(), 4);
    EXPECT_EQ(memfdBytes(r), 0u) << "the punch must remove the pages from both mappings";
    auto page20 = withPatch(std::vector<uint8_t>(kPg, 0), 100, payload);
    EXPECT_EQ(c.read(20 * kPg, kPg), page20);
    EXPECT_EQ(c.read(30 * kPg, 2 * kPg), mine);
    EXPECT_TRUE(allZero(c.read(7 * kPg, kPg).data(), kPg));
    pager.sync();
    s = r.stats();
    EXPECT_EQ(s.spilled, 4u);
    EXPECT_EQ(s.restored, 4u);
    EXPECT_EQ(s.clientFaults, 7u);

    // Evicted again: the daemon's own mapping does not wait for them (SIGBUS
    // mode, Region::fastStore); prefetch restores them, both sides read them
    // without a fault.
    ASSERT_EQ(r.evictAll(), 4);
    std::vector<uint8_t> got(kPg);
    EXPECT_FALSE(guarded(r.base() + 20 * kPg, kPg, [&] { std::memcpy(got.data(), r.base() + 20 * kPg, kPg); }));
    ASSERT_EQ(r.prefetch(20 * kPg, kPg), 1);
    ASSERT_EQ(r.prefetch(30 * kPg, 2 * kPg), 2);
    EXPECT_EQ(daemonRead(r, 20 * kPg, kPg), page20);
    EXPECT_EQ(daemonRead(r, 30 * kPg, 2 * kPg), mine);
    pager.sync();
    EXPECT_EQ(r.stats().cpuFaults, 0u);
    EXPECT_EQ(c.read(30 * kPg, 2 * kPg), mine);
    EXPECT_EQ(r.stats().clientFaults, 7u);
    EXPECT_EQ(r.stats().errors, 0u);
    EXPECT_FALSE(r.clientGone());
}

INSTANTIATE_TEST_SUITE_P(Client, RegionClientAs,
                         ::testing::Values(ClientCase{"root", false, true}, ClientCase{"nobody", true, true},
                                           ClientCase{"nobody_missing_only", true, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// Whether `addr` is mapped in process `pid` now: bit 63 of its pagemap entry.
bool mappedIn(pid_t pid, uint64_t addr)
{
    Fd f(::open(("/proc/" + std::to_string(pid) + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC));
    uint64_t e = 0;
    if (!f || ::pread(f.get(), &e, sizeof(e), static_cast<off_t>(addr / kPg * sizeof(e))) != sizeof(e))
        ADD_FAILURE() << "pagemap of " << pid << ": " << std::strerror(errno);
    return e >> 63;
}

size_t mappedPages(const ClientProcess& c, uint64_t off, uint64_t pages)
{
    size_t n = 0;
    for (uint64_t p = 0; p < pages; ++p)
        n += mappedIn(c.pid(), c.base() + off + p * kPg);
    return n;
}

// Pages go into the client's own mapping through its userfaultfd (its
// memory cgroup pays, it takes no fault): packet patches, prefetch and the
// region's own CPU faults alike; the region's mapping maps them on first
// touch. With clientInstallWait 0 they go into the region's mapping only.
TEST(RegionClient, PagesAreInstalledIntoTheClientsMapping)
{
    NPF_REQUIRE_UFFD();
    for (const bool through : {true, false}) {
        SCOPED_TRACE(through ? "through the client's userfaultfd" : "clientInstallWait 0");
        ClientProcess c({});
        NPF_REQUIRE_CLIENT(c);
        RegionConfig cfg = clientConfig();
        if (!through)
            cfg.clientInstallWait = 0us;
        Region r(cfg, c.memory());
        ASSERT_EQ(r.installsThroughClient(), through);
        PagerThread pager(r);

        // Packet patches into 8 pages, one run.
        std::vector<std::vector<uint8_t>> payloads;
        std::vector<Patch> ps;
        for (uint64_t p = 0; p < 8; ++p) {
            payloads.push_back(randomBytes(700, 10 + static_cast<uint32_t>(p)));
            ps.push_back({(16 + p) * kPg + 300, payloads.back().data(), 700});
        }
        std::vector<int> res(ps.size());
        ASSERT_EQ(r.applyPatches(ps, res), 8);
        EXPECT_EQ(mappedPages(c, 16 * kPg, 8), through ? 8u : 0u);
        // Prefetch.
        ASSERT_EQ(r.prefetch(40 * kPg, 4 * kPg), 4);
        EXPECT_EQ(mappedPages(c, 40 * kPg, 4), through ? 4u : 0u);
        // The region's own mapping never waits on a missing page (its
        // userfaultfd is in SIGBUS mode: Region::fastStore) and installs
        // nothing for it.
        std::vector<uint8_t> got(kPg);
        EXPECT_FALSE(guarded(r.base() + 50 * kPg, kPg, [&] { std::memcpy(got.data(), r.base() + 50 * kPg, kPg); }));
        pager.sync();
        EXPECT_EQ(mappedPages(c, 50 * kPg, 1), 0u);

        for (uint64_t p = 0; p < 8; ++p) {
            auto page = withPatch(std::vector<uint8_t>(kPg, 0), 300, payloads[p]);
            EXPECT_EQ(c.read((16 + p) * kPg, kPg), page) << "page " << 16 + p << ", the client's side";
            EXPECT_EQ(daemonRead(r, (16 + p) * kPg, kPg), page) << "page " << 16 + p << ", the region's side";
        }
        pager.sync();
        RegionStats s = r.stats();
        EXPECT_EQ(s.pagesInstalled, 12u);
        EXPECT_EQ(s.clientInstalls, through ? 12u : 0u);
        EXPECT_EQ(s.clientFallbacks, 0u);
        EXPECT_EQ(s.clientLate, 0u);
        EXPECT_EQ(s.clientFaults, 0u) << "the client found every page it read";
        EXPECT_EQ(s.errors, 0u);

        // Evicted (punched from both mappings), then faulted by the client:
        // restored into its mapping.
        ASSERT_EQ(r.evictAll(), 12);
        EXPECT_EQ(mappedPages(c, 16 * kPg, 8), 0u);
        EXPECT_EQ(c.read(17 * kPg + 300, 700), payloads[1]);
        pager.sync();
        EXPECT_EQ(r.stats().clientFaults, 1u);
        EXPECT_EQ(r.stats().restored, 1u);
        EXPECT_EQ(r.stats().clientInstalls, through ? 13u : 0u);
    }
}

// Deadlines of 1, 20 and 60 us: copies into the client's mapping miss them,
// some before the installer's thread started them (cancelled), some while it
// ran them (late: the region installs the same pages through its own
// mapping, or finds them put there by the late copy, EEXIST, and those pages
// wait out the late copy before they may be evicted). Whatever the timing:
// every byte right on both sides, every page in, eviction whole again once
// the late copies have ended.
// No cool-down after a miss, so that every round offers its job to the
// client (with one, the first miss would send the next 100 ms of rounds
// through the region's mapping).
TEST(RegionClient, CopiesThatMissTheirDeadlineLoseNothing)
{
    NPF_REQUIRE_UFFD();
    constexpr uint64_t kRun = 64; // one batch: one copy
    for (const auto deadline : {1us, 20us, 60us}) {
        SCOPED_TRACE("deadline " + std::to_string(deadline.count()) + " us");
        ClientProcess c({});
        NPF_REQUIRE_CLIENT(c);
        RegionConfig cfg = clientConfig();
        cfg.clientInstallWait = deadline;
        cfg.clientCoolDown = 0ms;
        Region r(cfg, c.memory());
        ASSERT_TRUE(r.installsThroughClient());
        PagerThread pager(r); // the client's faults
        const uint64_t runs = r.pages() / kRun;
        for (uint32_t round = 0; round < 24; ++round) {
            SCOPED_TRACE("round " + std::to_string(round));
            const uint64_t first = (round % runs) * kRun;
            std::vector<std::vector<uint8_t>> payloads;
            std::vector<Patch> ps;
            for (uint64_t p = 0; p < kRun; ++p) {
                payloads.push_back(randomBytes(64, round * 1000 + static_cast<uint32_t>(p)));
                ps.push_back({(first + p) * kPg + 8, payloads.back().data(), 64});
            }
            std::vector<int> res(ps.size());
            ASSERT_EQ(r.applyPatches(ps, res), static_cast<int>(kRun));
            for (uint64_t p : {uint64_t{0}, kRun / 2, kRun - 1}) {
                EXPECT_EQ(c.read((first + p) * kPg + 8, 64), payloads[p]) << "page " << first + p;
                EXPECT_EQ(daemonRead(r, (first + p) * kPg + 8, 64), payloads[p]) << "page " << first + p;
            }
            // Everything goes out once the late copy, if any, has ended.
            ASSERT_TRUE(waitFor([&] {
                (void)r.evictAll();
                return r.residentPages() == 0;
            })) << r.residentPages() << " pages stay resident";
            EXPECT_EQ(c.read((first + 5) * kPg + 8, 64), payloads[5]) << "restored after eviction";
        }
        pager.sync();
        const RegionStats s = r.stats();
        std::printf("[ client ] %lld us deadline: %llu late or cancelled; pages into the client's mapping %llu, "
                    "into the region's %llu, found there already (a late copy's) %llu\n",
                    static_cast<long long>(deadline.count()), static_cast<unsigned long long>(s.clientLate),
                    static_cast<unsigned long long>(s.clientInstalls),
                    static_cast<unsigned long long>(s.clientFallbacks), static_cast<unsigned long long>(s.eexist));
        if (deadline == 1us) {
            EXPECT_GE(s.clientLate, 1u) << "no copy missed a 1 us deadline: the test proved nothing";
        }
        EXPECT_EQ(s.clientInstalls + s.clientFallbacks, s.pagesInstalled);
        // Every page of every round went in: through the client's mapping,
        // the region's, or by a late copy (the region's copy then found it).
        EXPECT_GE(s.pagesInstalled + s.eexist, 24 * kRun);
        EXPECT_EQ(s.errors, 0u);
    }
}

// The threads of this process named `name`.
std::set<pid_t> threadsNamed(const std::string& name)
{
    std::set<pid_t> tids;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream in(e.path() / "comm");
        std::string comm;
        if (std::getline(in, comm) && comm == name)
            tids.insert(pid_t(std::stol(e.path().filename().string())));
    }
    return tids;
}

// Holds a thread of this process in a signal handler until release(): how
// a test makes npfd's installer thread take as long as a client can make its
// UFFDIO_COPY take (its mmap lock held for writing, reclaim in its memory
// cgroup), which no test can time. One at a time.
class ThreadHold {
public:
    explicit ThreadHold(pid_t tid)
    {
        if (::pipe2(held_, O_CLOEXEC) != 0 || ::pipe2(release_, O_CLOEXEC) != 0)
            throw std::system_error(errno, std::generic_category(), "pipes of ThreadHold");
        heldFd_ = held_[1];
        releaseFd_ = release_[0];
        struct sigaction sa{};
        sa.sa_handler = onSignal;
        sa.sa_flags = SA_RESTART;
        ::sigemptyset(&sa.sa_mask);
        if (::sigaction(SIGUSR1, &sa, &old_) != 0 ||
            ::syscall(SYS_tgkill, ::getpid(), tid, SIGUSR1) != 0)
            throw std::system_error(errno, std::generic_category(), "SIGUSR1 to thread " + std::to_string(tid));
        char b;
        if (::read(held_[0], &b, 1) != 1) // the handler runs
            throw std::system_error(errno, std::generic_category(), "thread " + std::to_string(tid) + " held");
    }
    ~ThreadHold()
    {
        release();
        ::sigaction(SIGUSR1, &old_, nullptr);
        for (int fd : {held_[0], held_[1], release_[0], release_[1]})
            ::close(fd);
    }
    ThreadHold(const ThreadHold&) = delete;
    ThreadHold& operator=(const ThreadHold&) = delete;

    void release()
    {
        if (!released_.exchange(true))
            (void)!::write(release_[1], "r", 1);
    }

private:
    static void onSignal(int)
    {
        const int saved = errno;
        char b = 'h';
        (void)!::write(heldFd_, &b, 1);
        while (::read(releaseFd_, &b, 1) < 0 && errno == EINTR) {
        }
        errno = saved;
    }

    static inline int heldFd_ = -1, releaseFd_ = -1;
    int held_[2] = {-1, -1}, release_[2] = {-1, -1};
    struct sigaction old_{};
    std::atomic<bool> released_{false};
};

// A client that holds each copy into its mapping for 0.7 of the deadline is
// never late, yet would hold its pager (which serves other tenants' regions
// too) for most of a deadline on every job. After its first slow job it
// gets no more for a while: its pages go through npfd's mapping and nobody
// waits for it. After the cool-down a job goes to it again (a probe); done at
// once, the client has its jobs back.
TEST(RegionClient, ASlowClientGetsNoJobsUntilItCatchesUp)
{
    NPF_REQUIRE_UFFD();
    ClientProcess c({});
    NPF_REQUIRE_CLIENT(c);
    // Generous: the job takes 0.7 of it and more, never less; what a loaded
    // machine (or a VM's first touch of a huge page: 15 ms seen) adds must
    // not make it late.
    constexpr auto kWait = 200ms;
    RegionConfig cfg = clientConfig();
    cfg.clientInstallWait = kWait;
    cfg.clientSlowForgiven = 0; // the first slow job starts a cool-down (CoolDown's tests forgive)
    const std::set<pid_t> before = threadsNamed("npf-install"); // a late job's, of an earlier test
    Region r(cfg, c.memory());
    ASSERT_TRUE(r.installsThroughClient());
    std::set<pid_t> installers = threadsNamed("npf-install");
    for (pid_t t : before)
        installers.erase(t);
    ASSERT_EQ(installers.size(), 1u) << "the region's installer thread";
    PagerThread pager(r);
    auto patch = [&](uint64_t page, uint32_t seed) {
        const std::vector<uint8_t> p = randomBytes(700, seed);
        Patch ps[] = {{page * kPg + 300, p.data(), 700}};
        int res[1];
        EXPECT_EQ(r.applyPatches(ps, res), 1);
        EXPECT_EQ(c.read(page * kPg + 300, 700), p) << "page " << page;
    };

    {
        ThreadHold held(*installers.begin());
        std::thread client([&] {
            // The job is posted right after its copy is counted.
            EXPECT_TRUE(waitFor([&] { return r.stats().copyCalls >= 1; }));
            std::this_thread::sleep_for(kWait * 7 / 10);
            held.release();
        });
        patch(10, 1);
        client.join();
    }
    RegionStats s = r.stats();
    EXPECT_EQ(s.clientSlow, 1u) << "a job done after 0.7 of its deadline";
    EXPECT_EQ(s.clientInstalls, 1u) << "done in time: the client's page";
    EXPECT_EQ(s.clientLate, 0u);

    // During the cool-down: npfd's pages, and no job posted (no wait). A job
    // posted now would have gone through at once: client_installs.
    patch(20, 2);
    patch(30, 3);
    s = r.stats();
    EXPECT_EQ(s.clientFallbacks, 2u) << "its pages went through npfd's mapping";
    EXPECT_EQ(s.clientInstalls, 1u) << "a job was posted during the cool-down";
    EXPECT_EQ(s.copyCalls, 3u) << "the slow job, then npfd's own copies";
    EXPECT_EQ(s.clientSlow, 1u);

    // Once the cool-down is over, the probe goes through the client's mapping.
    uint64_t page = 40;
    ASSERT_TRUE(test::waitUntil(
        [&] {
            patch(page, static_cast<uint32_t>(page));
            ++page;
            return r.stats().clientInstalls > 1;
        },
        10s, 10ms))
        << "no job posted after the cool-down";
    patch(page, static_cast<uint32_t>(page));
    s = r.stats();
    EXPECT_EQ(s.clientInstalls, 3u) << "fast, the client has its jobs back";
    EXPECT_EQ(s.clientSlow, 1u);
    EXPECT_EQ(s.clientLate, 0u);
    EXPECT_EQ(s.clientInstalls + s.clientFallbacks, s.pagesInstalled);
    EXPECT_EQ(s.errors, 0u);
}

// The client writes its own mapping (outside any epoch protocol) while the
// region evicts those pages over and over: the fence on the client's
// mapping keeps every write.
TEST(RegionClient, ClientWritesRacingEvictionAreNeverLost)
{
    NPF_REQUIRE_UFFD();
    ClientProcess c(ClientSpec{});
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    if (!r.clientWriteProtect())
        GTEST_SKIP() << "no userfaultfd write-protect on shmem: the client's writes are not fenced";
    PagerThread pager(r);
    constexpr uint64_t kLen = 4 * kPg;
    ASSERT_TRUE(c.startWriteLoop(0, kLen));
    int evictions = 0;
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < start + 1s || evictions < 500) {
        ASSERT_LT(std::chrono::steady_clock::now(), start + 20s) << "the client stopped making progress";
        int n = r.evictAll();
        ASSERT_GE(n, 0);
        evictions += n;
    }
    uint64_t writes = c.stopWriteLoop();
    ASSERT_GT(writes, 0u);
    auto want = writeLoopImage(kLen, writes);
    auto got = c.read(0, kLen);
    ASSERT_EQ(got.size(), kLen);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), kLen), 0) << "a client write was lost to eviction";
    EXPECT_EQ(std::memcmp(daemonRead(r, 0, kLen).data(), want.data(), kLen), 0);
    EXPECT_EQ(r.stats().errors, 0u);
    std::printf("[ client ] %llu client writes against %d page evictions, %llu client faults\n",
                (unsigned long long)writes, evictions, (unsigned long long)r.stats().clientFaults);
}

// kill -9 while the region serves the client's faults and fences its
// mapping: the region notices through the next failing ioctl, stops serving
// the client, and goes on working for its own side.
TEST(RegionClient, KilledClientIsReportedGoneAndNothingHangs)
{
    NPF_REQUIRE_UFFD();
    ClientProcess c(ClientSpec{});
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    PagerThread pager(r);
    ASSERT_TRUE(c.startWriteLoop(0, 8 * kPg));
    auto start = std::chrono::steady_clock::now();
    while (r.stats().clientFaults < 50) {
        ASSERT_LT(std::chrono::steady_clock::now(), start + 20s) << "the client does not fault";
        ASSERT_GE(r.evictAll(), 0);
    }
    c.kill();

    // Eviction goes on, with something to evict each round: fencing the
    // dead client's mapping fails (ESRCH), which is how the region learns.
    auto payload = randomBytes(64, 3);
    for (uint64_t i = 0; !r.clientGone() && r.clientWriteProtect(); ++i) {
        ASSERT_LT(std::chrono::steady_clock::now(), start + 20s) << "the dead client was never noticed";
        Patch ps[] = {{(100 + i % 64) * kPg, payload.data(), 64}};
        int res[1];
        ASSERT_EQ(r.applyPatches(ps, res), 1);
        ASSERT_GE(r.evictAll(), 0);
    }
    EXPECT_FALSE(r.checkClient());
    EXPECT_TRUE(r.clientGone());
    EXPECT_EQ(r.stats().clientGone, 1u);
    EXPECT_EQ(r.serviceClientFaults(), -ENOTCONN);

    // The region's own side is unaffected.
    Patch ps[] = {{200 * kPg + 5, payload.data(), 64}};
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    ASSERT_GT(r.evictAll(), 0);
    ASSERT_EQ(r.prefetch(200 * kPg, kPg), 1);
    EXPECT_EQ(daemonRead(r, 200 * kPg + 5, 64), payload);
    EXPECT_EQ(r.stats().clientGone, 1u);
}

// A client that dies while idle is found by checkClient() (one ioctl).
TEST(RegionClient, CheckClientFindsAnIdleClientGone)
{
    NPF_REQUIRE_UFFD();
    ClientProcess c(ClientSpec{});
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    EXPECT_TRUE(r.checkClient());
    EXPECT_FALSE(r.clientGone());
    c.kill();
    EXPECT_FALSE(r.checkClient());
    EXPECT_TRUE(r.clientGone());
    EXPECT_EQ(r.stats().clientGone, 1u);
    EXPECT_EQ(r.serviceClientFaults(), -ENOTCONN);
}

TEST(RegionClient, MemfdSmallerThanClaimedIsRefused)
{
    NPF_REQUIRE_UFFD();
    ClientSpec spec;
    spec.memfdSize = spec.size / 2;
    ClientProcess c(spec);
    NPF_REQUIRE_CLIENT(c);
    try {
        Region r(clientConfig(spec.size), c.memory());
        FAIL() << "adopted a memfd smaller than the region";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EINVAL);
        std::string what = e.what();
        EXPECT_NE(what.find("npf-test-client-region"), std::string::npos) << what;
        EXPECT_NE(what.find("less than the"), std::string::npos) << what;
    }
}

// The client's uffd also covers a page outside the region: a fault there is
// not ours to serve (the client stays blocked in it; its problem).
TEST(RegionClient, FaultOutsideTheRegionIsIgnoredAndCounted)
{
    NPF_REQUIRE_UFFD();
    ClientProcess c(ClientSpec{});
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    PagerThread pager(r);
    ASSERT_TRUE(c.touchOutside());
    ASSERT_TRUE(waitFor([&] { return r.stats().clientIgnored >= 1; })) << "the fault never arrived";
    RegionStats s = r.stats();
    EXPECT_EQ(s.clientIgnored, 1u);
    EXPECT_EQ(s.clientFaults, 0u);
    EXPECT_EQ(s.pagesInstalled, 0u);
    EXPECT_EQ(s.errors, 0u);
    EXPECT_FALSE(r.clientGone());
    EXPECT_TRUE(r.checkClient());
}

// A uffd registered on nothing of the region: no fault ever arrives and the
// client is not fenced; the region works as before.
TEST(RegionClient, UffdCoveringNothingIsHarmless)
{
    NPF_REQUIRE_UFFD();
    ClientSpec spec;
    spec.registerRegion = false;
    ClientProcess c(spec);
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    EXPECT_FALSE(r.clientWriteProtect());
    ASSERT_TRUE(r.installsThroughClient());
    auto payload = randomBytes(300, 4);
    for (uint64_t p : {3, 9}) {
        Patch ps[] = {{p * kPg + 7, payload.data(), 300}};
        int res[1];
        ASSERT_EQ(r.applyPatches(ps, res), 1);
        EXPECT_EQ(res[0], 0);
        EXPECT_EQ(c.read(p * kPg + 7, 300), payload);
    }
    // Its mapping refused the first copy into it: every page went in
    // through the region's own mapping, the client's installer retired.
    RegionStats s = r.stats();
    EXPECT_EQ(s.clientInstalls, 0u);
    EXPECT_EQ(s.clientFallbacks, 2u);
    EXPECT_EQ(s.copyCalls, 3u) << "one refused copy into the client's mapping, then ours twice";
    EXPECT_EQ(r.evictAll(), 2);
    EXPECT_EQ(r.serviceClientFaults(), 0);
    EXPECT_EQ(r.stats().errors, 0u);
    EXPECT_TRUE(r.checkClient());
}

// The client punches holes in its memfd under pages the region believes
// present: the pager writes and saves through the memfd (a write through its
// own mapping would fault on its own uffd and wait for itself), and a fault
// on such a page, by either side, installs it again.
TEST(RegionClient, ClientPunchingItsMemfdCannotHangThePager)
{
    NPF_REQUIRE_UFFD();
    ClientProcess c(ClientSpec{});
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    PagerThread pager(r);
    ASSERT_EQ(r.prefetch(0, 12 * kPg), 12);
    ASSERT_TRUE(c.punch(0, 12 * kPg));

    auto payload = randomBytes(500, 5);
    auto patch = std::async(std::launch::async, [&] {
        Patch ps[] = {{kPg + 10, payload.data(), 500}};
        int res[1];
        return r.applyPatches(ps, res);
    });
    ASSERT_EQ(patch.wait_for(10s), std::future_status::ready) << "the pager hung on a page the client punched";
    EXPECT_EQ(patch.get(), 1);
    EXPECT_EQ(c.read(kPg + 10, 500), payload);
    // Its write into the hole failed (the alias is guarded, and allocates
    // nothing): the page counts as vanished and is installed again, through
    // the client's userfaultfd (its memory cgroup pays, not npfd's).
    EXPECT_EQ(r.stats().vanished, 1u);
    EXPECT_EQ(r.stats().clientInstalls, 13u);

    // The daemon's side never waits on a punched page: its mapping raises
    // SIGBUS (guarded here, as the workers' stores are). The client's fault
    // on one installs it again.
    std::vector<uint8_t> got(kPg);
    EXPECT_FALSE(guarded(r.base() + 8 * kPg, kPg, [&] { std::memcpy(got.data(), r.base() + 8 * kPg, kPg); }));
    EXPECT_TRUE(allZero(c.read(9 * kPg, kPg).data(), kPg));
    pager.sync();
    EXPECT_EQ(r.stats().vanished, 2u);

    auto evict = std::async(std::launch::async, [&] { return r.evictAll(); });
    ASSERT_EQ(evict.wait_for(10s), std::future_status::ready) << "eviction hung on a punched page";
    EXPECT_EQ(evict.get(), 12);
    EXPECT_EQ(c.read(kPg, kPg), withPatch(std::vector<uint8_t>(kPg, 0), 10, payload));
    EXPECT_EQ(r.stats().errors, 0u);
}

// A worker's store (Region::fastStore) into a page the client punched
// behind its resident bit returns false at once instead of waiting for a
// pager (which may be waiting for that worker: issue of the grace period):
// the region's own mapping is in SIGBUS mode. Counted; the pager places
// the datagram through the memfd instead. No pager thread runs here: had
// the store waited for one, the test would hang.
TEST(RegionClient, FastStoreIntoAPunchedPageReturnsInsteadOfWaiting)
{
    NPF_REQUIRE_UFFD();
    ClientProcess c(ClientSpec{});
    NPF_REQUIRE_CLIENT(c);
    Region r(clientConfig(), c.memory());
    ASSERT_EQ(r.prefetch(0, 4 * kPg), 4);
    const auto payload = randomBytes(300, 9);
    auto store = [&](uint64_t off) {
        return r.fastStore(off, payload.size(), [&] { std::memcpy(r.base() + off, payload.data(), payload.size()); });
    };
    EXPECT_TRUE(store(kPg + 7));
    EXPECT_EQ(c.read(kPg + 7, payload.size()), payload);
    EXPECT_EQ(r.stats().fastPathFaults, 0u);

    ASSERT_TRUE(c.punch(0, 4 * kPg));
    EXPECT_TRUE(r.isResident(2 * kPg, kPg)) << "the region still believes the page present";
    EXPECT_FALSE(store(2 * kPg + 100));
    EXPECT_EQ(r.stats().fastPathFaults, 1u);
    // A datagram across two pages stops at the first one missing.
    EXPECT_FALSE(store(2 * kPg - 100));
    EXPECT_EQ(r.stats().fastPathFaults, 2u);

    Patch ps[] = {{2 * kPg + 100, payload.data(), uint32_t(payload.size())}};
    int res[1];
    EXPECT_EQ(r.applyPatches(ps, res), 1);
    EXPECT_EQ(c.read(2 * kPg + 100, payload.size()), payload);
    EXPECT_EQ(r.stats().vanished, 1u) << "the pager found it gone too, and installed it again";
    EXPECT_EQ(r.stats().errors, 0u);
}

// What the region refuses to adopt, and the seal it puts on what it adopts.
void setFlags(int fd, int set, int clear)
{
    const int fl = ::fcntl(fd, F_GETFL);
    ASSERT_GE(fl, 0);
    ASSERT_EQ(::fcntl(fd, F_SETFL, (fl | set) & ~clear), 0);
}

// File status flags live in the open file description, which the client
// shares with whoever it hands a descriptor to. After the handover it sets
// O_APPEND on its region and spill memfds (pwrite() would then append: the
// files would grow without bound and payloads land past the region) and
// makes its userfaultfd blocking (a read() with no event pending would hang
// the pager). None of it reaches the region: it writes through its own open
// file descriptions and reads the uffd non-blocking per call.
TEST(RegionClient, FlagsTheClientChangesAfterTheHandoverChangeNothing)
{
    NPF_REQUIRE_UFFD();
    ClientSpec spec;
    ClientProcess c(spec);
    NPF_REQUIRE_CLIENT(c);
    ClientMemory m = c.memory();
    Fd memfd(::dup(m.memfd.get())), uffd(::dup(m.uffd.get()));
    Fd spill(::memfd_create("npf-test-hostile-spill", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_TRUE(spill);
    m.spill.reset(::dup(spill.get()));
    Region r(clientConfig(spec.size), std::move(m));
    setFlags(memfd.get(), O_APPEND, 0);
    setFlags(spill.get(), O_APPEND, 0);
    setFlags(uffd.get(), 0, O_NONBLOCK);

    // No event pending: returns at once. (Before, this read() blocked; a
    // client read would then be the only thing to release it.)
    auto served = std::async(std::launch::async, [&] { return r.serviceClientFaults(); });
    if (served.wait_for(10s) != std::future_status::ready) {
        ADD_FAILURE() << "serviceClientFaults blocked on a uffd the client made blocking";
        (void)c.read(0, 1); // an event, so the blocked read returns and the test can end
    }
    EXPECT_EQ(served.get(), 0);

    // Payloads land at their offsets, evicted pages are saved at theirs:
    // neither file grows, and everything comes back.
    const auto payload = randomBytes(1000, 7);
    Patch ps[] = {{3 * kPg + 100, payload.data(), 1000}};
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    for (int round = 0; round < 20; ++round) {
        ASSERT_GE(r.evictAll(), 0);
        ASSERT_GE(r.prefetch(0, 8 * kPg), 0) << round;
    }
    ASSERT_GE(r.evictAll(), 1);
    struct stat st{};
    ASSERT_EQ(::fstat(memfd.get(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), spec.size) << "the region memfd grew";
    ASSERT_EQ(::fstat(spill.get(), &st), 0);
    EXPECT_LE(static_cast<uint64_t>(st.st_size), spec.size) << "the spill grew past the region";
    PagerThread pager(r);
    EXPECT_EQ(c.read(3 * kPg + 100, 1000), payload);
}

TEST(RegionClientAdopt, RefusesMemoryItCannotServeSafely)
{
    NPF_REQUIRE_UFFD();
    const uint64_t size = 64 * kPg;
    auto memfd = [&](unsigned flags, int seals = 0) {
        Fd fd(::memfd_create("npf-test-adopt", MFD_CLOEXEC | flags));
        EXPECT_TRUE(fd);
        EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
        if (seals) {
            EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
        }
        return fd;
    };
    auto refused = [&](ClientMemory m, int err, const char* says) {
        try {
            Region r(clientConfig(size), std::move(m));
            ADD_FAILURE() << "adopted; expected: " << says;
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code().value(), err) << e.what();
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    refused({memfd(0), Fd(), 0}, EPERM, "MFD_ALLOW_SEALING");
    refused({memfd(MFD_ALLOW_SEALING, 0x0010 /* F_SEAL_FUTURE_WRITE */), Fd(), 0}, EPERM, "sealed against writes");
    refused({Fd(::eventfd(0, EFD_CLOEXEC)), Fd(), 0}, EINVAL, "not a shmem memfd");
    refused({memfd(MFD_ALLOW_SEALING), Fd(::eventfd(0, EFD_CLOEXEC)), 0}, EINVAL, "not a userfaultfd");
    {
        // A real userfaultfd at an address that is no page.
        Userfaultfd u = Userfaultfd::open(UFFD_FEATURE_MISSING_SHMEM, 0, "test");
        Fd dup(::fcntl(u.fd(), F_DUPFD_CLOEXEC, 0));
        refused({memfd(MFD_ALLOW_SEALING), std::move(dup), 123}, EINVAL, "page-aligned");
    }

    // Adopted without a uffd: the region's own side works, and the memfd
    // can no longer shrink under the daemon's mapping.
    Fd fd = memfd(MFD_ALLOW_SEALING);
    Fd keep(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
    Region r(clientConfig(size), ClientMemory{std::move(fd), Fd(), 0});
    EXPECT_TRUE(r.adopted());
    EXPECT_EQ(r.clientUffdFd(), -1);
    EXPECT_EQ(r.serviceClientFaults(), -ENOTCONN);
    EXPECT_FALSE(r.checkClient());
    EXPECT_NE(::ftruncate(keep.get(), kPg), 0);
    EXPECT_EQ(errno, EPERM);
    auto a = randomBytes(2 * kPg, 6);
    Patch ps[] = {{5 * kPg, a.data(), static_cast<uint32_t>(a.size())}};
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    ASSERT_EQ(r.evictAll(), 2);
    ASSERT_EQ(r.prefetch(5 * kPg, 2 * kPg), 2);
    EXPECT_EQ(daemonRead(r, 5 * kPg, 2 * kPg), a);
}

// Client fault service latency, as the client sees it (printed, not asserted):
// the region's path, and for comparison the same fault served the two ways a
// page server can, without a Region: (A) UFFDIO_COPY through its own mapping
// + UFFDIO_WAKE of the client, which the region does; (B) UFFDIO_COPY
// straight into the client's mapping through the client's uffd.
TEST(RegionClient, ClientFaultLatency)
{
    NPF_REQUIRE_UFFD();
    constexpr uint64_t kPages = 4000;
    ClientSpec spec;
    spec.size = 4096 * kPg;
    auto summary = [](const std::vector<uint32_t>& lat) {
        LatencyHistogram h;
        for (uint32_t v : lat)
            h.record(v);
        return h.summary();
    };

    {
        ClientProcess c(spec);
        NPF_REQUIRE_CLIENT(c);
        Region r(clientConfig(spec.size), c.memory());
        PagerThread pager(r);
        auto lat = c.touch(0, kPages * kPg);
        ASSERT_EQ(lat.size(), kPages);
        pager.sync();
        EXPECT_EQ(r.stats().clientFaults, kPages);
        std::printf("[ client ] client fault served by the region (poll + serviceClientFaults): %s ns\n",
                    summary(lat).c_str());
    }

    for (bool direct : {false, true}) {
        ClientProcess c(spec);
        NPF_REQUIRE_CLIENT(c);
        ClientMemory m = c.memory();
        MmapArea mine = MmapArea::map(spec.size, PROT_READ | PROT_WRITE, MAP_SHARED, m.memfd.get(), 0, "test");
        Userfaultfd own = Userfaultfd::open(UFFD_FEATURE_MISSING_SHMEM, 0, "test");
        own.registerRange(mine.get(), spec.size, UFFDIO_REGISTER_MODE_MISSING, "test");
        Userfaultfd theirs = Userfaultfd::adopt(std::move(m.uffd), "test client");
        std::atomic<bool> stop{false};
        std::atomic<uint64_t> served{0};
        std::thread server([&] {
            alignas(4096) static uint8_t zero[4096];
            uffd_msg msg[16];
            while (!stop.load()) {
                pollfd p{theirs.fd(), POLLIN, 0};
                if (::poll(&p, 1, 2) <= 0)
                    continue;
                int n = theirs.readEvents(msg, 16);
                for (int i = 0; i < n; ++i) {
                    uint64_t off = (msg[i].arg.pagefault.address - m.base) & ~(kPg - 1);
                    if (direct) {
                        long rc = theirs.copy(reinterpret_cast<void*>(m.base + off), zero, kPg, nullptr);
                        if (rc == -EEXIST)
                            theirs.wake(reinterpret_cast<void*>(m.base + off), kPg);
                    } else {
                        own.copy(mine.as<uint8_t>() + off, zero, kPg, nullptr);
                        theirs.wake(reinterpret_cast<void*>(m.base + off), kPg);
                    }
                    served.fetch_add(1);
                }
            }
        });
        auto lat = c.touch(0, kPages * kPg);
        stop = true;
        server.join();
        ASSERT_EQ(lat.size(), kPages);
        EXPECT_EQ(served.load(), kPages);
        std::printf("[ client ] raw %s: %s ns\n",
                    direct ? "(B) UFFDIO_COPY through the client's uffd"
                           : "(A) UFFDIO_COPY through our mapping + UFFDIO_WAKE client",
                    summary(lat).c_str());
    }
}

} // namespace
} // namespace npf::test
