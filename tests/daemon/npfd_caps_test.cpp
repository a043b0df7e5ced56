// npfd with only the capabilities deploy/ documents (root; the rig's
// namespaces): uid 0 with exactly CAP_BPF, CAP_NET_ADMIN, CAP_NET_RAW,
// CAP_IPC_LOCK and CAP_PERFMON (effective, permitted and bounding; no
// inheritable or ambient ones), so no CAP_SYS_ADMIN, CAP_SYS_PTRACE,
// CAP_DAC_OVERRIDE or CAP_CHOWN; no full userfaultfd (vm.unprivileged_userfaultfd
// 0, and /dev/userfaultfd unusable in npfd's own mount namespace); a memlock
// limit of 8 MiB, as container runtimes give. uid-65534 clients receive
// socat streams byte for byte through it, with 4 KiB and 2 MiB pages,
// evicting under a small budget. And each of the five is needed: npfd
// without any one of them does not start, and says why.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine_fixture.h"
#include "huge_pages.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

struct Cap {
    const char* name; // as setpriv spells it
    int bit;
};
constexpr Cap kBpf{"bpf", 39}, kNetAdmin{"net_admin", 12}, kNetRaw{"net_raw", 13}, kIpcLock{"ipc_lock", 14},
    kPerfmon{"perfmon", 38};
constexpr Cap kNeeded[] = {kBpf, kNetAdmin, kNetRaw, kIpcLock, kPerfmon};

// A pod's memlock limit (runtimes give 64 KiB or 8 MiB): the UMEM, 16 MiB
// per queue, is over it.
constexpr const char* kPodMemlock = "--memlock=8388608:8388608";

// The command npfd (or the probe) runs under: its own mount namespace in
// which /dev/userfaultfd is `blocker`, a file of mode 0 (uid 0 without
// CAP_DAC_OVERRIDE may not open it), the pod's memlock limit, then setpriv
// to exactly `caps` in group nogroup, the socket's (so its chgrp needs no
// CAP_CHOWN).
std::vector<std::string> confined(const std::string& blocker, const std::vector<Cap>& caps)
{
    std::string set = "-all";
    for (const Cap& c : caps)
        set += std::string(",+") + c.name;
    return {"unshare",
            "--mount",
            "--propagation=private",
            "sh",
            "-c",
            "mount --bind " + blocker + " /dev/userfaultfd && exec \"$@\"",
            "confined",
            "prlimit",
            kPodMemlock,
            "setpriv",
            "--groups=65534",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=" + set,
            "--no-new-privs",
            "--"};
}

std::vector<Cap> allBut(const Cap& gone)
{
    std::vector<Cap> out;
    for (const Cap& c : kNeeded)
        if (c.bit != gone.bit)
            out.push_back(c);
    return out;
}

// The Cap* lines of /proc/PID/status, by name ("CapEff" -> mask).
std::map<std::string, uint64_t> capSets(pid_t pid)
{
    std::map<std::string, uint64_t> out;
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("Cap"))
            out[line.substr(0, line.find(':'))] = std::strtoull(line.substr(line.find(':') + 1).c_str(), nullptr, 16);
    return out;
}

class NpfdCaps : public EngineE2E {
protected:
    void SetUp() override
    {
        EngineE2E::SetUp();
        if (IsSkipped())
            return;
        if (readFile("/proc/sys/vm/unprivileged_userfaultfd").rfind('0', 0) != 0)
            GTEST_SKIP() << "vm.unprivileged_userfaultfd is not 0: anyone may have a full userfaultfd here";
        blocker_ = dir_.path + "/no-userfaultfd";
        std::ofstream{blocker_};
        ASSERT_EQ(::chmod(blocker_.c_str(), 0), 0);
    }

    // The probe, confined as npfd is: full userfaultfd refused, user-mode-only allowed.
    void expectOnlyUserModeUffd(Rig& rig)
    {
        const std::string err = dir_.path + "/probe.err";
        std::vector<std::string> argv = confined(blocker_, {std::begin(kNeeded), std::end(kNeeded)});
        argv.push_back(UFFD_PROBE_PATH);
        Child probe(rig.veth().rxNs().path(), argv, err);
        int st = -1;
        ASSERT_TRUE(probe.wait(int(test::kDeadline.count()), &st));
        const std::string said = readFile(err);
        EXPECT_EQ(st, 0) << said;
        EXPECT_NE(said.find("full: refused"), std::string::npos) << said;
        EXPECT_NE(said.find("user-mode-only: ok"), std::string::npos) << said;
    }

    TempDir dir_;
    std::string blocker_;
};

// npfd's capability sets are exactly the five.
void expectExactlyTheFive(pid_t pid)
{
    uint64_t five = 0;
    for (const Cap& c : kNeeded)
        five |= uint64_t{1} << c.bit;
    std::map<std::string, uint64_t> sets = capSets(pid);
    EXPECT_EQ(sets["CapEff"], five);
    EXPECT_EQ(sets["CapPrm"], five);
    EXPECT_EQ(sets["CapBnd"], five);
    EXPECT_EQ(sets["CapInh"], 0u);
    EXPECT_EQ(sets["CapAmb"], 0u);
}

// A uid-65534 npf-recv --connect receives a 2 MiB socat stream byte for
// byte, cold, in a region 8x its resident budget (`extra` adds options).
void receiveStream(Rig& rig, const Npfd& npfd, const TempDir& dir, uint16_t port, const std::vector<std::string>& extra)
{
    const size_t size = 2 << 20;
    const std::string in = dir.path + "/s.in", out = dir.path + "/s.out", err = dir.path + "/s.err";
    writeStream(in, size, port);
    std::vector<std::string> args = {"-n", std::to_string(size / 1024), "--idle", "3", "--cold"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto recv = startClientRecv(rig, npfd, port, out, err, args);
    ASSERT_TRUE(recv->ready());
    EXPECT_EQ(socatSend(rig, in, port), 0);
    int st = -1;
    ASSERT_TRUE(recv->wait(int(test::kDeadline.count()), &st)) << readFile(err);
    EXPECT_EQ(st, 0) << readFile(err) << "\nnpfd:\n" << npfd.log();
    EXPECT_TRUE(readFile(out) == readFile(in)) << "the client's output differs from its stream";
    const std::string said = readFile(err);
    EXPECT_NE(said.find("evicted="), std::string::npos) << said;
    EXPECT_EQ(said.find("evicted=0 "), std::string::npos) << "nothing was evicted: the spill went untested\n" << said;
}

TEST_F(NpfdCaps, FiveCapabilitiesServeAnUnprivilegedClientWith4KiBPages)
{
    Rig rig;
    ASSERT_NO_FATAL_FAILURE(expectOnlyUserModeUffd(rig));
    Npfd npfd(rig, dir_, NpfdOptions{.wrapper = confined(blocker_, {std::begin(kNeeded), std::end(kNeeded)})});
    expectExactlyTheFive(npfd.pid());
    receiveStream(rig, npfd, dir_, kFirstPort + 1, {"--region", "16M", "--budget", "2M"});
    EXPECT_EQ(npfd.stop(), 0) << npfd.log();
    const nlohmann::json status = nlohmann::json::parse(rig.statusJson(), nullptr, false);
    EXPECT_EQ(status.value("state", ""), "none") << "npfd left its program or pins behind: " << status.dump();
}

TEST_F(NpfdCaps, FiveCapabilitiesServeAnUnprivilegedClientWith2MiBPages)
{
    topology::HugePages pool(8);
    if (!pool.ok())
        GTEST_SKIP() << "2 MiB huge pages unavailable: " << pool.why();
    Rig rig;
    Npfd npfd(rig, dir_, NpfdOptions{.wrapper = confined(blocker_, {std::begin(kNeeded), std::end(kNeeded)})});
    expectExactlyTheFive(npfd.pid());
    receiveStream(rig, npfd, dir_, kFirstPort + 2, {"--region", "16M", "--budget", "4M", "--page-size", "2M"});
    EXPECT_EQ(npfd.stop(), 0) << npfd.log();
}

// Each of the five taken away: npfd does not start, and its error says what
// was refused (CAP_IPC_LOCK: at the pod's memlock limit; with an unlimited
// one the UMEM needs no CAP_IPC_LOCK).
struct Without {
    Cap cap;
    const char* says; // in npfd's error
};

class NpfdWithout : public NpfdCaps, public ::testing::WithParamInterface<Without> {};

TEST_P(NpfdWithout, DoesNotStartAndSaysWhy)
{
    Rig rig;
    try {
        Npfd npfd(rig, dir_, NpfdOptions{.wrapper = confined(blocker_, allBut(GetParam().cap))});
        ADD_FAILURE() << "npfd started without CAP_" << GetParam().cap.name << ":\n" << npfd.log();
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(GetParam().says), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(EachOfTheFive, NpfdWithout,
                         // Without CAP_BPF or CAP_NET_ADMIN npfd's own check refuses first (the
                         // kernel would: every bpf(2) call, kernel.unprivileged_bpf_disabled; creating
                         // the XSKMAP, loading an XDP program, the netlink attach).
                         ::testing::Values(Without{kBpf, "needs CAP_BPF and CAP_NET_ADMIN"},
                                           Without{kNetAdmin, "needs CAP_BPF and CAP_NET_ADMIN"},
                                           Without{kNetRaw, "CONFIG_XDP_SOCKETS): Operation not permitted"},
                                           Without{kIpcLock, "RLIMIT_MEMLOCK that holds them): No buffer space"},
                                           Without{kPerfmon, "verifier log): Permission denied"}),
                         [](const auto& info) {
                             std::string name = info.param.cap.name;
                             for (char& c : name)
                                 c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                             return name;
                         });

} // namespace
} // namespace npf::e2e
