// Who pays for a client's pages (root; real memory cgroups, v2 where this
// machine's unified hierarchy carries memory, else v1's): npfd in a cgroup of
// its own, an unprivileged npf-recv --connect in another, 16 MiB of datagrams
// into the client's cold region. npfd copies each page into the client's
// mapping through the client's userfaultfd, and the kernel charges it to the
// client's cgroup; with client_install_wait_us 0 npfd copies into its own
// mapping and its own cgroup pays -- the same measurement, the other answer.
// With 2 MiB pages the same in hugetlb cgroups (v2): the client's own thread
// allocates its huge pages.
//
// And a client's installer stuck in the kernel (its thread stopped with
// ptrace, as an ioctl held up by the client's mm would stop it) costs the
// other clients nothing, and the stuck client's own datagrams arrive byte for
// byte through npfd's mapping meanwhile, counted.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <thread>

#include "engine_fixture.h"
#include "huge_pages.h"
#include "hugetlb_cgroup.h"
#include "npf/client.h"
#include "memory_cgroup.h"
#include "npfd_rig.h"
#include "thread_freeze.h"

namespace npf::e2e {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr size_t kStream = 16 << 20; // 16384 datagrams of 1024 bytes (socatSend)

class NpfdClientMemory : public EngineE2E {};

std::vector<std::string> recvArgs(Rig& rig, const Npfd& d, uint16_t port, const std::string& out)
{
    return {"setpriv",          "--reuid=65534", "--regid=65534", "--clear-groups", NPF_RECV_PATH, rig.rxIf(),
            std::to_string(port), "--connect",   d.socket(),      "-o",             out,           "--cold"};
}

struct Charges {
    uint64_t client = 0, npfd = 0; // bytes each cgroup grew by while the stream went in
    uint64_t installs = 0, fallbacks = 0, pages = 0;
};

// One run: npfd in `npfdCg`, an unprivileged npf-recv --connect with
// `clientArgs` in `clientCg`, kStream of datagrams into its cold region.
struct StreamRun {
    std::string settings;                // npfd's config
    std::vector<std::string> clientArgs; // npf-recv's region options
    // The engine's counters say the client has the whole stream.
    std::function<bool(Counters& engine)> received;
    // npfd's region counters (a snapshot it takes every 500 ms) account for
    // the bytes the cgroups grew by.
    std::function<bool(Counters& region, uint64_t grown)> accounted;
};

template <typename Cgroup>
Charges streamInto(const Cgroup& npfdCg, const Cgroup& clientCg, const StreamRun& run)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, NpfdOptions{.wrapper = npfdCg.wrapper(), .settings = run.settings});
    std::vector<std::string> argv = clientCg.wrapper();
    for (const std::vector<std::string>& more : {recvArgs(rig, npfd, kFirstPort, "/dev/null"), run.clientArgs})
        argv.insert(argv.end(), more.begin(), more.end());
    Child client(rig.veth().rxNs().path(), argv, dir.path + "/client.err", true);
    EXPECT_TRUE(client.ready()) << readFile(dir.path + "/client.err");
    const uint64_t client0 = clientCg.usage(), npfd0 = npfdCg.usage();
    const std::string in = dir.path + "/in";
    writeStream(in, kStream, 7);
    EXPECT_EQ(socatSend(rig, in, kFirstPort), 0);
    Counters engine;
    EXPECT_TRUE(test::waitUntil([&] {
        engine = rig.engineSnapshot();
        return run.received(engine);
    })) << engine["completed_ok"] << " ok, " << engine["completed_lost"] << " lost\n" << npfd.log();
    // Measured with the client alive: its region's pages go when it does.
    const uint64_t client1 = clientCg.usage(), npfd1 = npfdCg.usage();
    const Charges c{client1 > client0 ? client1 - client0 : 0, npfd1 > npfd0 ? npfd1 - npfd0 : 0};
    Counters region;
    EXPECT_TRUE(test::waitUntil([&] {
        region = rig.regionSnapshot();
        return run.accounted(region, c.client + c.npfd);
    })) << region["pages_installed"] << " pages installed";
    std::cout << "client cgroup +" << c.client / 1024 << " KiB, npfd's +" << c.npfd / 1024 << " KiB; client_installs "
              << region["client_installs"] << ", client_fallbacks " << region["client_fallbacks"] << ", client_slow "
              << region["client_slow"] << ", client_late "
              << region["client_late"] << ", pages_installed " << region["pages_installed"] << "; "
              << engine["completed_lost"] << " datagrams lost\n";
    return {c.client, c.npfd, region["client_installs"], region["client_fallbacks"], region["pages_installed"]};
}

// 4 KiB pages: memory cgroups for npfd and the client.
class NpfdClientPages : public NpfdClientMemory {
protected:
    void SetUp() override
    {
        NpfdClientMemory::SetUp();
        if (IsSkipped())
            return;
        if (auto cg = test::MemoryCgroup::create(8ull << 30))
            npfdCg_.emplace(std::move(*cg));
        if (auto cg = test::MemoryCgroup::create(2ull << 30))
            clientCg_.emplace(std::move(*cg));
        if (!npfdCg_ || !clientCg_)
            GTEST_SKIP() << "no cgroup hierarchy here carries the memory controller";
    }
    Charges stream(const std::string& settings)
    {
        // Every datagram completed OK; one snapshot of npfd's counters (what
        // a 4 KiB page's cgroup grew by is not exact: no sum to wait for).
        return streamInto(*npfdCg_, *clientCg_,
                          // The whole region resident: no eviction (and no spill) in what is measured.
                          {settings, {"--region", "64M", "--budget", "64M"},
                           [](Counters& e) { return e["completed_ok"] >= kStream / 1024; },
                           [](Counters&, uint64_t) { return true; }});
    }
    std::optional<test::MemoryCgroup> npfdCg_, clientCg_;
};

TEST_F(NpfdClientPages, TheClientsCgroupPaysForItsPages)
{
    // The longest wait npfd allows, as for huge pages below: this measures
    // the charge. At the default (1 ms) a loaded machine makes a few honest
    // jobs slow or late (the installer or the charge waited for a CPU): four
    // deadlines of that are forgiven (CoolDown), more sends the next 100 ms
    // of this short burst through npfd's mapping: 0 to 177 of 8,300 pages
    // went so in six runs here, but a loaded CI machine may make it more.
    const Charges c = stream(R"("client_install_wait_us": 100000)");
    // 16 MiB of payload lies in at least 16 MiB of the region's pages. Each
    // is charged to whoever installed it: the client for the pages copied
    // into its mapping, npfd for those a copy that missed its deadline left
    // to npfd's mapping (a loaded machine: the installer waited for a CPU).
    EXPECT_GE(c.pages, kStream / 4096);
    EXPECT_EQ(c.installs + c.fallbacks, c.pages);
    EXPECT_GE(c.installs, c.pages / 2) << "most pages go into the client's mapping";
    EXPECT_GE(c.client, c.installs * 4096 * 9 / 10) << "the client's cgroup was not charged for its pages";
    EXPECT_LT(c.npfd, c.fallbacks * 4096 + 4 * kMiB) << "npfd's cgroup was charged for the client's pages";
}

TEST_F(NpfdClientPages, WithClientInstallWaitZeroNpfdPays)
{
    const Charges c = stream(R"("client_install_wait_us": 0)");
    EXPECT_GE(c.pages, kStream / 4096);
    EXPECT_GE(c.npfd, c.pages * 4096 * 9 / 10) << "npfd's cgroup was not charged for the pages it installed";
    EXPECT_LT(c.client, 4 * kMiB) << "the client's cgroup was charged for pages npfd installed in its own mapping";
    EXPECT_EQ(c.installs, 0u);
}

// The same with 2 MiB pages, which the kernel charges to the hugetlb cgroup
// of the task that allocates them, whichever mapping they enter: the
// client's own thread (libnpf's installer) copies them in from the images
// npfd writes to its install area. Exact: a huge page is charged whole.
// 48 huge pages reserved and warmed (the first use of a fresh one costs
// milliseconds here), hugetlb cgroups for npfd and the client.
class NpfdClientHugePages : public NpfdClientMemory {
protected:
    static constexpr uint64_t kHuge = 2 * kMiB;
    void SetUp() override
    {
        NpfdClientMemory::SetUp();
        if (IsSkipped())
            return;
        huge_.emplace(48);
        if (!huge_->ok())
            GTEST_SKIP() << huge_->why;
    }
    Charges stream(const std::string& settings)
    {
        // Every datagram completed (OK, or lost and counted: a loaded machine
        // can overrun the backup ring), and npfd's snapshot that has every
        // charged page installed.
        return streamInto(
            *huge_->npfd, *huge_->client,
            {settings, {"--region", "32M", "--budget", "32M", "--page-size", "2M"},
             [](Counters& e) { return e["completed_ok"] + e["completed_lost"] >= kStream / 1024; },
             [](Counters& r, uint64_t grown) { return r["pages_installed"] * kHuge >= grown; }});
    }
    std::optional<test::HugePagesAndCgroups> huge_;
};

TEST_F(NpfdClientHugePages, TheClientsPodPaysForItsHugePages)
{
    // The longest wait npfd allows (100 ms per page): on a loaded machine the
    // client's thread may wait for a CPU, and this measures the charge.
    const Charges c = stream(R"("client_install_wait_us": 100000)");
    EXPECT_GE(c.pages, kStream / kHuge);
    EXPECT_EQ(c.installs + c.fallbacks, c.pages);
    EXPECT_GE(c.installs, c.pages / 2) << "most huge pages are allocated by the client's thread";
    EXPECT_EQ(c.client, c.installs * kHuge) << "the client's hugetlb cgroup pays for what its thread installed";
    EXPECT_EQ(c.npfd, c.fallbacks * kHuge) << "npfd's pays for what it installed, and only that";
}

TEST_F(NpfdClientHugePages, WithClientInstallWaitZeroNpfdPays)
{
    const Charges c = stream(R"("client_install_wait_us": 0)");
    EXPECT_GE(c.pages, kStream / kHuge);
    EXPECT_EQ(c.installs, 0u);
    EXPECT_EQ(c.npfd, c.pages * kHuge);
    EXPECT_EQ(c.client, 0u);
}

// Bytes in `path` now.
uint64_t sizeOf(const std::string& path)
{
    std::error_code ec;
    const auto n = std::filesystem::file_size(path, ec);
    return ec ? 0 : n;
}

TEST_F(NpfdClientMemory, AStuckInstallerCostsOtherClientsNothing)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    constexpr size_t kSize = 4 << 20;
    const std::string inA = dir.path + "/a.in", inB = dir.path + "/b.in";
    const std::string outA = dir.path + "/a.out", outB = dir.path + "/b.out";
    writeStream(inA, kSize, 11);
    writeStream(inB, kSize, 12);
    auto a = startClientRecv(rig, npfd, kFirstPort, outA, dir.path + "/a.err", {"--cold"});
    ASSERT_TRUE(a->ready());
    // A's region is the only one: its installer is npfd's only npf-install thread.
    const pid_t tid = test::threadNamed(npfd.pid(), "npf-install");
    std::optional<test::ThreadFreeze> frozen(std::in_place, npfd.pid(), tid);
    auto b = startClientRecv(rig, npfd, kFirstPort + 1, outB, dir.path + "/b.err", {"--cold"});
    ASSERT_TRUE(b->ready());
    int sa = -1, sb = -1;
    std::thread ta([&] { sa = socatSend(rig, inA, kFirstPort); });
    std::thread tb([&] { sb = socatSend(rig, inB, kFirstPort + 1); });
    ta.join();
    tb.join();
    EXPECT_EQ(sa, 0);
    EXPECT_EQ(sb, 0);
    ASSERT_TRUE(test::waitUntil([&] { return sizeOf(outA) >= kSize && sizeOf(outB) >= kSize; }))
        << "A received " << sizeOf(outA) << " bytes, B " << sizeOf(outB) << "\n" << npfd.log();
    // Read while both regions exist (a region's counters go with it), from
    // npfd's snapshot (every 500 ms) once it has the stream.
    Counters region;
    EXPECT_TRUE(test::waitUntil([&] {
        region = rig.regionSnapshot();
        return region["client_fallbacks"] + region["client_installs"] >= 2 * kSize / 4096;
    }));
    std::cout << "client_late " << region["client_late"] << ", client_fallbacks " << region["client_fallbacks"]
              << ", client_installs " << region["client_installs"] << "\n";
    EXPECT_GE(region["client_late"], 1u) << "A's job that its stopped installer never started";
    EXPECT_GE(region["client_fallbacks"], kSize / 4096) << "A's pages went through npfd's mapping";
    EXPECT_GE(region["client_installs"], 1u) << "B's went through its own installer";
    EXPECT_EQ(region["errors"], 0u);
    EXPECT_TRUE(readFile(outB) == readFile(inB)) << "B's stream, past A's stuck installer";
    EXPECT_TRUE(readFile(outA) == readFile(inA)) << "A's stream, through npfd's mapping";
    a->kill(SIGTERM);
    b->kill(SIGTERM);
    int ea = -1, eb = -1;
    ASSERT_TRUE(a->wait(int(test::kDeadline.count()), &ea));
    ASSERT_TRUE(b->wait(int(test::kDeadline.count()), &eb));
    EXPECT_EQ(ea, 0) << readFile(dir.path + "/a.err");
    EXPECT_EQ(eb, 0) << readFile(dir.path + "/b.err");
    // Let go, A's installer ends its late job (A is gone: the copy fails) and npfd serves on.
    frozen.reset();
    Client cli({.socket = npfd.socket(), .regionSize = 1 << 20, .name = "after"});
    EXPECT_NO_THROW((void)cli.openFlow(kFirstPort + 2));
    EXPECT_TRUE(npfd.running()) << npfd.log();
}

} // namespace
} // namespace npf::e2e
