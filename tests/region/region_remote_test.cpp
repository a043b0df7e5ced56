// A client's 2 MiB region whose huge pages the client's own thread installs
// (RemoteInstaller, npfd's side; InstallThread, libnpf's): here the client
// is this process -- its hugetlbfs memfd, its mapping registered with its
// own user-mode userfaultfd, its install area -- and its installer is the
// real one, one that lies (says it installed everything, installs nothing),
// one that never answers, or one that answers each job just short of its
// deadline. Whatever it does, every payload reaches the region and each page
// is counted once: installed by the client, or by npfd.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "client/install_thread.h"
#include "huge_pages.h"
#include "region_fixture.h"
#include "sys/futex.h"
#include "wait.h"

namespace npf::test {
namespace {

using namespace std::chrono_literals;
using topology::HugePages;
constexpr uint64_t kHuge = kHugePageSize;
constexpr unsigned kMfdHuge2M = 21u << 26; // MFD_HUGE_2MB

// The client's side: its region memfd mapped and registered, an install area.
struct HugeClient {
    Fd memfd, area;
    MmapArea map, areaMap;
    Userfaultfd uffd;

    HugeClient(uint64_t size, uint32_t images)
    {
        memfd.reset(::memfd_create("npf-test-huge-client", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | kMfdHuge2M));
        EXPECT_TRUE(memfd && ::ftruncate(memfd.get(), static_cast<off_t>(size)) == 0) << std::strerror(errno);
        map = MmapArea::map(size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd.get(), 0, "client region");
        uffd = Userfaultfd::open(UFFD_FEATURE_MISSING_HUGETLBFS, 0, "client", UFFD_USER_MODE_ONLY);
        uffd.registerRange(map.get(), size, UFFDIO_REGISTER_MODE_MISSING, "client");
        const uint64_t areaSize = NPF_INSTALL_IMAGES + images * kHuge;
        area.reset(::memfd_create("npf-test-install-area", MFD_CLOEXEC | MFD_ALLOW_SEALING));
        EXPECT_TRUE(area && ::ftruncate(area.get(), static_cast<off_t>(areaSize)) == 0);
        areaMap = MmapArea::map(areaSize, PROT_READ | PROT_WRITE, MAP_SHARED, area.get(), 0, "install area");
    }
    static Fd dup(int fd) { return Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }
    ClientMemory memory(int installArea)
    {
        return {dup(memfd.get()), dup(uffd.fd()), reinterpret_cast<uint64_t>(map.get()), Fd(), dup(installArea)};
    }
    npf_install_ctl* ctl() const { return areaMap.as<npf_install_ctl>(); }
};

// A stand-in for the client's installer thread: ends every job npfd posts
// at once, with `answer(offset, len)` as the bytes it says it installed.
class FakeInstaller {
public:
    FakeInstaller(HugeClient& c, std::function<int64_t(uint64_t offset, uint64_t len)> answer)
        : thread_([this, &c, answer = std::move(answer)] {
              npf_install_ctl* ctl = c.ctl();
              while (!stop_.load()) {
                  const uint32_t post = std::atomic_ref<__u32>(ctl->post).load();
                  if (std::atomic_ref<__u32>(ctl->done).load() != post) {
                      const int64_t said = answer(std::atomic_ref<__u64>(ctl->offset).load(),
                                                  std::atomic_ref<__u64>(ctl->len).load());
                      std::atomic_ref<__s64>(ctl->result).store(said);
                      std::atomic_ref<__u32>(ctl->done).store(post);
                      futexWake(&ctl->done);
                  }
                  std::this_thread::yield();
              }
          })
    {
    }
    ~FakeInstaller()
    {
        stop_ = true;
        thread_.join();
    }

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// Every test: 8 huge pages reserved, and a client with an 8-page region and
// an install area of 2 images (the real thread brings its own).
class RegionRemote : public ::testing::Test {
protected:
    void SetUp() override
    {
        NPF_REQUIRE_HUGE_PAGES(pool_);
        client_.emplace(8 * kHuge, 2);
    }
    HugeClient& client() { return *client_; }

private:
    HugePages pool_{8};
    std::optional<HugeClient> client_;
};

// `wait`: how long the region waits for the client per page.
RegionConfig hugeClientConfig(uint64_t size, std::chrono::microseconds wait = std::chrono::microseconds(2000))
{
    RegionConfig c = smallConfig(size);
    c.pageSize = kHuge;
    c.name = "npf-test-remote";
    c.clientInstallWait = wait;
    return c;
}

// Payloads into pages 0, 1 (one run) and then 3, checked through the client's mapping.
void patchAndCheck(Region& r, const HugeClient& c)
{
    const std::vector<uint8_t> a = randomBytes(1000, 1), b = randomBytes(1400, 2), d = randomBytes(900, 3);
    Patch first[] = {{100, a.data(), 1000}, {kHuge + 200, b.data(), 1400}};
    int res[2];
    ASSERT_EQ(r.applyPatches(first, res), 2);
    Patch later[] = {{3 * kHuge + 300, d.data(), 900}};
    ASSERT_EQ(r.applyPatches(later, res), 1);
    const uint8_t* m = c.map.as<uint8_t>();
    EXPECT_EQ(std::memcmp(m + 100, a.data(), a.size()), 0);
    EXPECT_EQ(std::memcmp(m + kHuge + 200, b.data(), b.size()), 0);
    EXPECT_EQ(std::memcmp(m + 3 * kHuge + 300, d.data(), d.size()), 0);
    EXPECT_TRUE(allZero(m, 100));
    EXPECT_TRUE(allZero(m + kHuge + 1600, kHuge - 1600));
    EXPECT_TRUE(r.isResident(0, 2 * kHuge));
    EXPECT_TRUE(r.isResident(3 * kHuge, kHuge));
    const RegionStats s = r.stats();
    EXPECT_EQ(s.pagesInstalled, 3u);
    EXPECT_EQ(s.errors, 0u);
}

TEST_F(RegionRemote, TheClientsThreadInstallsItsHugePages)
{
    HugeClient& c = client();
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    Fd ours(sv[0]), theirs(sv[1]);
    InstallThread installer(c.map.as<uint8_t>(), 8 * kHuge, kHuge, 2, c.uffd, ours.get(), [] {});
    // A deadline no loaded machine misses: every page is the thread's.
    Region r(hugeClientConfig(8 * kHuge, std::chrono::seconds(10)), c.memory(installer.areaFd()));
    ASSERT_TRUE(r.installsThroughClient());
    patchAndCheck(r, c);
    const RegionStats s = r.stats();
    EXPECT_EQ(s.clientInstalls, 3u) << "every page goes in through the client's thread";
    EXPECT_EQ(s.clientFallbacks, 0u);
    EXPECT_EQ(s.clientLate, 0u);
    EXPECT_EQ(s.eexist, 0u) << "a page the client installed was taken for one populated behind npfd's back";
}

TEST_F(RegionRemote, AClientThatLiesGetsEveryPageFromNpfd)
{
    HugeClient& c = client();
    // Says it installed the whole job, every time; installs nothing.
    FakeInstaller liar(c, [](uint64_t, uint64_t len) { return static_cast<int64_t>(len); });
    Region r(hugeClientConfig(8 * kHuge), c.memory(c.area.get()));
    patchAndCheck(r, c);
    const RegionStats s = r.stats();
    EXPECT_EQ(s.clientInstalls, 0u);
    EXPECT_EQ(s.clientFallbacks, 3u) << "npfd installed every page the client only said it had";
}

// A client's thread that installs its job but says it installed nothing --
// what a late job looks like when its copy lands after the deadline, before
// npfd's own: the page went in through the client's userfaultfd, its pod
// paid, and it is counted the client's, not a page populated behind npfd's
// back; the payloads are in either way.
TEST_F(RegionRemote, APageTheClientInstalledWithoutSayingSoIsTheClients)
{
    HugeClient& c = client();
    // Installs the whole job, says "none".
    FakeInstaller modest(c, [&c](uint64_t offset, uint64_t len) {
        int64_t got = 0;
        (void)c.uffd.copy(c.map.as<uint8_t>() + offset, c.areaMap.as<uint8_t>() + NPF_INSTALL_IMAGES, len, &got);
        return int64_t{0};
    });
    // A deadline no loaded machine misses: each job is answered.
    Region r(hugeClientConfig(8 * kHuge, std::chrono::seconds(10)), c.memory(c.area.get()));
    patchAndCheck(r, c);
    const RegionStats s = r.stats();
    EXPECT_EQ(s.clientInstalls, 3u) << "the client allocated every page";
    EXPECT_EQ(s.clientFallbacks, 0u);
    EXPECT_EQ(s.eexist, 0u) << "a page the client was asked for is not one populated behind npfd's back";
}

TEST_F(RegionRemote, AClientThatNeverAnswersCostsOneDeadline)
{
    HugeClient& c = client();
    Region r(hugeClientConfig(8 * kHuge), c.memory(c.area.get()));
    patchAndCheck(r, c);
    const RegionStats s = r.stats();
    // 2 MiB pages go one per job: page 0's was late, and the client is
    // posted nothing more until it ends it.
    EXPECT_EQ(s.clientLate, 1u) << "one job waited for, then none until the client ends it";
    EXPECT_EQ(s.clientInstalls, 0u);
    EXPECT_EQ(s.clientFallbacks, 3u) << "every page copied in by npfd";
    // Page 0 stays in until the client ends its job: a late copy into a
    // hole evicted meanwhile would bring back stale content.
    EXPECT_EQ(r.evictAll(), 2) << "pages 1 and 3 may go, not 0";
    EXPECT_TRUE(r.isResident(0, kHuge));
    // The client ends it (late, as it may): page 0 may go, and jobs are
    // posted again once the cool-down the late job started is over (page 5
    // is npfd's to install until then, and evicted again for the next try).
    const uint32_t posted = std::atomic_ref<__u32>(c.ctl()->post).load();
    std::atomic_ref<__u32>(c.ctl()->done).store(posted);
    EXPECT_EQ(r.evictAll(), 1);
    const std::vector<uint8_t> e = randomBytes(500, 4);
    ASSERT_TRUE(test::waitUntil(
        [&] {
            (void)r.evictAll();
            Patch again[] = {{5 * kHuge, e.data(), 500}};
            int res[1];
            EXPECT_EQ(r.applyPatches(again, res), 1);
            return std::atomic_ref<__u32>(c.ctl()->post).load() != posted;
        },
        10s, 10ms))
        << "no job posted after the cool-down";
    EXPECT_EQ(r.stats().clientLate, 2u) << "posted again (and missed again: nobody answers)";
    EXPECT_EQ(std::memcmp(c.map.as<uint8_t>() + 5 * kHuge, e.data(), e.size()), 0);
}

// A client whose thread answers each job after 0.7 of its deadline is never
// late, yet would hold its pager (which serves other tenants' regions too)
// for most of a deadline on every job. After its first slow job it gets no
// more for a while: its pages go through npfd's mapping and nobody waits for
// it. After the cool-down a job is posted again (a probe); answered at once,
// the client has its jobs back.
TEST_F(RegionRemote, ASlowClientGetsNoJobsUntilItCatchesUp)
{
    HugeClient& c = client();
    // Generous: the job takes 0.7 of it and more, never less; what a loaded
    // machine (or a VM's first touch of a huge page: 15 ms seen) adds must
    // not make it late.
    constexpr auto kWait = 200ms;
    std::atomic<bool> slow{true};
    // Installs every job and says so; while `slow`, 0.7 of the job's deadline (per page) after its post.
    FakeInstaller dawdler(c, [&](uint64_t offset, uint64_t len) {
        if (slow)
            std::this_thread::sleep_for(kWait * 7 / 10 * (len / kHuge));
        int64_t got = 0;
        (void)c.uffd.copy(c.map.as<uint8_t>() + offset, c.areaMap.as<uint8_t>() + NPF_INSTALL_IMAGES, len, &got);
        return got;
    });
    RegionConfig cfg = hugeClientConfig(8 * kHuge, kWait);
    cfg.clientSlowForgiven = 0; // the first slow job starts a cool-down (CoolDown's tests forgive)
    Region r(cfg, c.memory(c.area.get()));
    auto posts = [&] { return std::atomic_ref<__u32>(c.ctl()->post).load(); };
    const uint32_t first = posts();
    auto patch = [&](uint64_t page, uint32_t seed) {
        const std::vector<uint8_t> p = randomBytes(700, seed);
        Patch ps[] = {{page * kHuge + 300, p.data(), 700}};
        int res[1];
        EXPECT_EQ(r.applyPatches(ps, res), 1);
        EXPECT_EQ(std::memcmp(c.map.as<uint8_t>() + page * kHuge + 300, p.data(), p.size()), 0) << "page " << page;
    };

    patch(0, 1);
    RegionStats s = r.stats();
    EXPECT_EQ(s.clientSlow, 1u) << "a job answered after 0.7 of its deadline";
    EXPECT_EQ(s.clientInstalls, 1u) << "answered in time: the client's page";
    EXPECT_EQ(s.clientLate, 0u);
    EXPECT_EQ(posts(), first + 1);

    // During the cool-down: npfd's pages, and no job posted (no wait).
    patch(2, 2);
    patch(4, 3);
    s = r.stats();
    EXPECT_EQ(posts(), first + 1) << "a job was posted during the cool-down";
    EXPECT_EQ(s.clientFallbacks, 2u) << "its pages went through npfd's mapping";
    EXPECT_EQ(s.clientInstalls, 1u);
    EXPECT_EQ(s.clientSlow, 1u);

    // The client catches up; once the cool-down is over, its probe goes
    // through it (page 6, evicted again between tries: npfd's until then).
    slow = false;
    ASSERT_TRUE(test::waitUntil(
        [&] {
            (void)r.evictAll();
            patch(6, 4);
            return r.stats().clientInstalls > 1;
        },
        10s, 10ms))
        << "no job posted after the cool-down";
    EXPECT_EQ(posts(), first + 2) << "one probe";
    (void)r.evictAll();
    patch(6, 4);
    patch(7, 5);
    s = r.stats();
    EXPECT_EQ(posts(), first + 4) << "fast, the client has its jobs back";
    EXPECT_EQ(s.clientInstalls, 4u);
    EXPECT_EQ(s.clientSlow, 1u);
    EXPECT_EQ(s.clientLate, 0u);
    EXPECT_EQ(s.clientInstalls + s.clientFallbacks, s.pagesInstalled);
    EXPECT_EQ(s.errors, 0u);
}

} // namespace
} // namespace npf::test
