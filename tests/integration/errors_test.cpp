// npfctl error paths, through the real binary: exit codes of docs/cli.md and
// the state the kernel is left in.
#include <unistd.h>

#include <filesystem>

#include "fixture.h"

namespace npf::itest {
namespace {

namespace fs = std::filesystem;

using AttachErrorTest = ModeTest;

TEST_P(AttachErrorTest, AttachTwiceIsAConflict)
{
    ASSERT_EQ(rig().npfctl("attach " + ifname() + " --mode " + mode()).status, kOk);
    uint32_t prog = rig().status()["prog_id"].get<uint32_t>();

    for (const char* m : {"native", "skb"}) {
        RunResult r = rig().npfctl("attach " + ifname() + " --mode " + m);
        EXPECT_EQ(r.status, kConflict) << describe(r);
        EXPECT_TRUE(contains(r.err, "already attached")) << r.err;
    }
    // The first instance is untouched.
    nlohmann::json st = rig().status();
    EXPECT_EQ(st["state"], "attached");
    EXPECT_EQ(st["prog_id"], prog);
    EXPECT_EQ(rig().link()["xdp"]["prog"]["id"], prog);
    EXPECT_TRUE(fs::exists(rig().pinDir() + "/npf_stats"));
}

// A program npf did not load, attached by iproute2.
TEST_P(AttachErrorTest, ForeignProgramNeedsForce)
{
    RunResult ip = rig().inRx("ip link set dev " + ifname() + " " + ipXdpFlag() + " obj " FOREIGN_XDP_OBJ " sec xdp");
    ASSERT_EQ(ip.status, 0) << describe(ip);
    nlohmann::json link = rig().link();
    ASSERT_EQ(link["xdp"]["prog"]["name"], "itest_foreign") << link.dump();
    uint32_t foreign = link["xdp"]["prog"]["id"].get<uint32_t>();

    RunResult r = rig().npfctl("attach " + ifname() + " --mode " + mode());
    EXPECT_EQ(r.status, kConflict) << describe(r);
    EXPECT_TRUE(contains(r.err, "foreign XDP program 'itest_foreign'")) << r.err;
    EXPECT_TRUE(contains(r.err, "--force")) << r.err;
    EXPECT_EQ(rig().link()["xdp"]["prog"]["id"], foreign);
    EXPECT_FALSE(fs::exists(rig().pinDir())) << "a failed attach left pins";

    nlohmann::json st = rig().status();
    EXPECT_EQ(st["state"], "none");
    ASSERT_EQ(st["foreign_programs"].size(), 1u) << st.dump();
    EXPECT_EQ(st["foreign_programs"][0]["id"], foreign);
    EXPECT_EQ(st["foreign_programs"][0]["name"], "itest_foreign");
    EXPECT_EQ(st["foreign_programs"][0]["mode"], mode());

    // detach without --force leaves foreign programs alone.
    RunResult d = rig().npfctl("detach " + ifname());
    EXPECT_EQ(d.status, kOk) << describe(d);
    EXPECT_EQ(rig().link()["xdp"]["prog"]["id"], foreign);

    RunResult forced = rig().npfctl("attach " + ifname() + " --mode " + mode() + " --force");
    ASSERT_EQ(forced.status, kOk) << describe(forced);
    st = rig().status();
    EXPECT_EQ(st["state"], "attached");
    EXPECT_TRUE(st["foreign_programs"].empty()) << st.dump();
    link = rig().link();
    EXPECT_EQ(link["xdp"]["prog"]["name"], "npf_xdp") << link.dump();
    EXPECT_EQ(link["xdp"]["prog"]["id"], st["prog_id"]);
    EXPECT_EQ(link["xdp"]["mode"], ipLinkMode());
    ASSERT_EQ(link["xdp"]["attached"].size(), 1u) << "the foreign program is still attached: " << link.dump();

    ASSERT_EQ(rig().npfctl("detach " + ifname()).status, kOk);
    EXPECT_FALSE(rig().link().contains("xdp")) << rig().link().dump();
    EXPECT_FALSE(fs::exists(rig().pinDir()));
}

// A foreign program in the other slot (native vs generic) blocks attach too,
// and --force removes it: two XDP programs on one interface would both run.
TEST_P(AttachErrorTest, ForeignProgramInTheOtherSlotNeedsForce)
{
    std::string otherFlag = mode() == "native" ? "xdpgeneric" : "xdpdrv";
    RunResult ip = rig().inRx("ip link set dev " + ifname() + " " + otherFlag + " obj " FOREIGN_XDP_OBJ " sec xdp");
    ASSERT_EQ(ip.status, 0) << describe(ip);

    RunResult r = rig().npfctl("attach " + ifname() + " --mode " + mode());
    EXPECT_EQ(r.status, kConflict) << describe(r);
    EXPECT_EQ(rig().link()["xdp"]["prog"]["name"], "itest_foreign");

    RunResult forced = rig().npfctl("attach " + ifname() + " --mode " + mode() + " --force");
    ASSERT_EQ(forced.status, kOk) << describe(forced);
    nlohmann::json link = rig().link();
    ASSERT_EQ(link["xdp"]["attached"].size(), 1u) << link.dump();
    EXPECT_EQ(link["xdp"]["prog"]["name"], "npf_xdp");
    EXPECT_EQ(link["xdp"]["mode"], ipLinkMode());
}

// --then names a pinned XDP program; anything else changes nothing.
TEST_P(AttachErrorTest, ThenNeedsAPinnedXdpProgram)
{
    RunResult r = rig().npfctl("attach " + ifname() + " --mode " + mode() + " --then /sys/fs/bpf/npf-itest-nosuch");
    EXPECT_EQ(r.status, kUsage) << describe(r);
    EXPECT_TRUE(contains(r.err, "--then /sys/fs/bpf/npf-itest-nosuch: No such file or directory (pin the program "
                                "in bpffs first")) << r.err;
    RunResult both = rig().npfctl("attach " + ifname() + " --then /sys/fs/bpf/x --then-existing");
    EXPECT_EQ(both.status, kUsage) << describe(both);

    const Pin map{"/sys/fs/bpf/npf-itest-map-" + std::to_string(::getpid())};
    ASSERT_EQ(test::sh("bpftool map create " + map.path + " type array key 4 value 4 entries 1 name itest_map"), 0);
    RunResult notProg = rig().npfctl("attach " + ifname() + " --mode " + mode() + " --then " + map.path);
    EXPECT_EQ(notProg.status, kUsage) << describe(notProg);
    EXPECT_TRUE(contains(notProg.err, map.path + " is not a BPF program (a map?)")) << notProg.err;
    EXPECT_FALSE(rig().link().contains("xdp")) << rig().link().dump();
    EXPECT_FALSE(fs::exists(rig().pinDir())) << "a failed attach left pins";
}

NPF_INSTANTIATE_MODES(AttachErrorTest);

using ErrorTest = RigTest;

TEST_F(ErrorTest, UnknownInterfaceIsExit4)
{
    for (const std::string cmd : {"attach", "stats", "detach", "flow list"}) {
        RunResult r = rig().npfctl(cmd + " npfnosuch0");
        EXPECT_EQ(r.status, kNoIface) << describe(r);
        EXPECT_TRUE(contains(r.err, "no interface 'npfnosuch0'")) << r.err;
    }
    // The rx interface exists only in the rx namespace.
    RunResult r = rig().npfctl("attach " + ifname(), /*inRx=*/false);
    EXPECT_EQ(r.status, kNoIface) << describe(r);
    EXPECT_FALSE(fs::exists(rig().pinDir()));
}

TEST_F(ErrorTest, BadArgumentsAreExit2AndChangeNothing)
{
    for (const std::string args : {" --mode turbo", " --queues 0", " --region-pages 100", " --bogus"}) {
        RunResult r = rig().npfctl("attach " + ifname() + args);
        EXPECT_EQ(r.status, kUsage) << describe(r);
    }
    RunResult noIface = rig().npfctl("attach");
    EXPECT_EQ(noIface.status, kUsage) << describe(noIface);
    EXPECT_FALSE(rig().link().contains("xdp")) << rig().link().dump();
    EXPECT_FALSE(fs::exists(rig().pinDir()));

    ASSERT_EQ(rig().npfctl("attach " + ifname() + " --mode skb").status, kOk);
    for (const std::string port : {"0", "70000", "50x"}) {
        RunResult r = rig().npfctl("flow add " + ifname() + " " + port);
        EXPECT_EQ(r.status, kUsage) << describe(r);
    }
    RunResult badAddr = rig().npfctl("flow add " + ifname() + " 5000 --addr 198.18.0.300");
    EXPECT_EQ(badAddr.status, kUsage) << describe(badAddr);
    EXPECT_TRUE(rig().flows().empty()) << rig().flows().dump();
}

TEST_F(ErrorTest, NotAttachedIsExit5)
{
    for (const std::string cmd : {"stats", "flow list", "flow add", "flow del"}) {
        std::string args = cmd + " " + ifname() + (cmd.starts_with("flow ") && cmd != "flow list" ? " 5000" : "");
        RunResult r = rig().npfctl(args);
        EXPECT_EQ(r.status, kConflict) << describe(r);
        EXPECT_TRUE(contains(r.err, "npf is not attached to " + ifname())) << r.err;
    }
    EXPECT_FALSE(fs::exists(rig().pinDir()));
}

TEST_F(ErrorTest, DuplicateFlowIsExit5)
{
    ASSERT_EQ(rig().npfctl("attach " + ifname() + " --mode skb").status, kOk);
    ASSERT_EQ(rig().npfctl("flow add " + ifname() + " 6000").status, kOk);
    RunResult dup = rig().npfctl("flow add " + ifname() + " 6000");
    EXPECT_EQ(dup.status, kConflict) << describe(dup);
    // Same port with an address is another flow.
    RunResult withAddr = rig().npfctl("flow add " + ifname() + " 6000 --addr " + rig().rxAddr());
    EXPECT_EQ(withAddr.status, kOk) << describe(withAddr);
    EXPECT_EQ(rig().flows().size(), 2u) << rig().flows().dump();
}

} // namespace
} // namespace npf::itest
