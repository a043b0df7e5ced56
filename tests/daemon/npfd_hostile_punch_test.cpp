// A client punches its 2 MiB pages out of its hugetlbfs region memfd behind
// npfd (root; the rig's namespaces), then has datagrams sent to them: the
// worker's store finds the page gone (fast path), the pager's write finds it
// gone (fault path), and the page must be installed again. npfd runs as the
// deployed case has it: in a hugetlb cgroup with a limit of 0 (a pod that
// requests no hugepages-2Mi), so any huge page npfd itself tried to
// allocate would be a SIGBUS (a write through a mapping) or ENOMEM (an
// ioctl). A victim of another rule receives byte for byte throughout.
//
//   - the client can allocate: its own thread installs the pages again
//     (install area), it receives every byte, npfd's cgroup stays at 0;
//   - nobody can (the client's cgroup at 0 too, after the punch): the
//     datagrams into those pages are completed LOST and counted
//     (place_errors), npfd lives, answers a hello, and stops on SIGTERM.
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>

#include "engine_fixture.h"
#include "hostile_client.h"
#include "hugetlb_cgroup.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

constexpr uint64_t kRegion = 8ull << 20; // four 2 MiB pages

// The client's hugetlbfs region memfd of `size` bytes, opened through /proc
// (the same file: what it punches there, it punches in its region).
Fd hugetlbfsMemfdOf(pid_t pid, uint64_t size)
{
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = ::opendir(dir.c_str());
    if (!d)
        return Fd();
    Fd found;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        Fd fd(::open((dir + "/" + e->d_name).c_str(), O_RDWR | O_CLOEXEC));
        struct statfs fs{};
        struct stat st{};
        if (fd && ::fstatfs(fd.get(), &fs) == 0 && fs.f_type == HUGETLBFS_MAGIC && ::fstat(fd.get(), &st) == 0 &&
            uint64_t(st.st_size) == size) {
            found = std::move(fd);
            break;
        }
    }
    ::closedir(d);
    return found;
}

class NpfdPunchedHugePages : public EngineE2E {
protected:
    void SetUp() override
    {
        EngineE2E::SetUp();
        if (IsSkipped())
            return;
        huge_.emplace(24);
        if (!huge_->ok())
            GTEST_SKIP() << huge_->why;
        ASSERT_TRUE(huge_->npfd->limit(0)) << "hugetlb.2MB.max of npfd's cgroup";
    }

    // The attack: a warm 2 MiB client (its thread installed its four pages)
    // punches them all, then `beforeSend` runs, then a stream goes to it.
    // Returns the client's exit status; its output is `out`.
    void attack(bool clientCanAllocate)
    {
        Rig rig;
        TempDir dir;
        // The longest wait for the client's thread npfd allows (100 ms per
        // page): npfd cannot install a page itself here, so a job that a
        // loaded machine makes late would lose its datagrams.
        Npfd npfd(rig, dir,
                  NpfdOptions{.extraArgs = {"-vv"}, // its log on a failure says why a datagram was lost
                              .wrapper = huge_->npfd->wrapper(),
                              .settings = R"("client_install_wait_us": 100000)",
                              .clients = rules()});
        const Footprint base = footprint(npfd);
        Victim victim(rig, npfd, dir, kVictimPort, kStream, 21);
        ASSERT_TRUE(victim.ready());

        const std::string in = dir.path + "/in", out = dir.path + "/out", err = dir.path + "/err";
        constexpr size_t kBytes = 1 << 20; // 1024 datagrams, spread over the four pages
        writeStream(in, kBytes, 33);
        std::vector<std::string> argv = huge_->client->wrapper();
        for (const std::string& a :
             {std::string("setpriv"), std::string("--reuid=65534"), std::string("--regid=65534"),
              std::string("--clear-groups"), std::string(NPF_RECV_PATH), rig.rxIf(), std::to_string(kFirstPort),
              std::string("--connect"), npfd.socket(), std::string("-o"), out, std::string("--page-size"),
              std::string("2M"), std::string("--region"), std::string("8M"), std::string("--budget"),
              std::string("8M"), std::string("--buf-size"), std::string("8192"), std::string("-n"),
              std::to_string(kBytes / 1024), std::string("--idle"), std::string("3")})
            argv.push_back(a);
        Child client(rig.veth().rxNs().path(), argv, err, true);
        ASSERT_TRUE(client.ready()) << readFile(err);
        const Counters r0 = rig.regionSnapshot();

        Fd memfd = hugetlbfsMemfdOf(client.pid(), kRegion);
        ASSERT_TRUE(memfd) << "the client's hugetlbfs region memfd";
        ASSERT_EQ(::fallocate(memfd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(kRegion)), 0)
            << std::strerror(errno);
        if (!clientCanAllocate) {
            ASSERT_TRUE(huge_->client->limit(0)) << "hugetlb.2MB.max of the client's cgroup";
        }

        victim.send();
        EXPECT_EQ(socatSend(rig, in, kFirstPort), 0);
        int st = -1;
        EXPECT_TRUE(client.wait(int(test::kDeadline.count()), &st)) << readFile(err);
        EXPECT_TRUE(victim.received()) << "during the attack";
        ASSERT_TRUE(npfd.running()) << "npfd died\n" << logTail(npfd);
        ASSERT_TRUE(answersHello(npfd)) << logTail(npfd);

        Counters r;
        EXPECT_TRUE(test::waitUntil([&] {
            r = delta(rig.regionSnapshot(), r0);
            return r["vanished"] > 0 && r["fast_path_faults"] > 0;
        })) << "the punched pages were never found gone: " << describe(r);
        EXPECT_EQ(huge_->npfd->usage(), 0u) << "npfd allocated a huge page";
        if (clientCanAllocate) {
            EXPECT_EQ(st, 0) << readFile(err);
            const std::string got = readFile(out), want = readFile(in);
            const auto diff = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
            EXPECT_TRUE(got == want) << "the client's stream is not byte for byte: " << got.size() << " of "
                                     << want.size() << " bytes, the first difference at byte "
                                     << (diff.first - got.begin()) << "\n"
                                     << readFile(err) << "npfd's log:\n"
                                     << logTail(npfd);
        } else {
            Counters e;
            EXPECT_TRUE(test::waitUntil([&] {
                e = rig.engineSnapshot();
                return e["completed_lost"] > 0 && e["place_errors"] > 0 &&
                       e["completed_ok"] + e["completed_lost"] >= kBytes / 1024 + kStream / 1024;
            })) << "the datagrams into pages nobody could have are not all accounted: " << describe(e);
        }
        std::printf("region counters over the attack: %s\n", describe(r).c_str());
        memfd.reset();
        EXPECT_TRUE(victimReceives(rig, npfd, dir, kVictimPort + 1, 22)) << "after the attack";
        EXPECT_TRUE(backToBaseline(npfd, base)) << "after the attack";
        EXPECT_EQ(npfd.stop(), 0) << "npfd did not stop on SIGTERM";
    }

    std::optional<test::HugePagesAndCgroups> huge_;
};

TEST_F(NpfdPunchedHugePages, TheClientsThreadInstallsThemAgainAndNpfdAllocatesNothing) { attack(true); }

TEST_F(NpfdPunchedHugePages, WhenNobodyCanHaveThemTheirDatagramsAreLostAndCounted) { attack(false); }

} // namespace
} // namespace npf::e2e
