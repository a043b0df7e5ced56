// npfctl without CAP_SYS_ADMIN (CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN only,
// docs/cli.md): it attaches npf_xdp directly, and through its pins runs
// flow add and list, status and detach; a foreign program, whose name it
// cannot read, shows as unknown, and removing it says it needs CAP_SYS_ADMIN.
#include <unistd.h>

#include <filesystem>

#include "fixture.h"

namespace npf::itest {
namespace {

namespace fs = std::filesystem;

class NoSysAdminTest : public ModeTest {
protected:
    RunResult npfctl(const std::string& args)
    {
        return rig().inRx(std::string("setpriv --inh-caps=-all --ambient-caps=-all "
                                      "--bounding-set=-all,+bpf,+perfmon,+net_admin -- ") +
                          NPFCTL_PATH + " " + args);
    }
};

TEST_P(NoSysAdminTest, NpfctlWorksThroughItsPins)
{
    RunResult a = npfctl("attach " + ifname() + " --mode " + mode());
    ASSERT_EQ(a.status, kOk) << describe(a);
    EXPECT_TRUE(contains(a.err, "attached directly")) << a.err;
    EXPECT_TRUE(fs::exists(rig().pinDir() + "/npf_xdp")) << "the program is not pinned";
    nlohmann::json link = rig().link();
    EXPECT_EQ(link["xdp"]["prog"]["name"], "npf_xdp") << link.dump();
    EXPECT_EQ(link["xdp"]["mode"], ipLinkMode());

    RunResult f = npfctl("flow add " + ifname() + " 7000");
    ASSERT_EQ(f.status, kOk) << describe(f);
    EXPECT_TRUE(fs::exists(rig().pinDir() + "/ring-0")) << "the flow's post ring is not pinned";
    RunResult l = npfctl("flow list " + ifname() + " --json");
    ASSERT_EQ(l.status, kOk) << describe(l);
    EXPECT_TRUE(contains(l.out, "7000")) << l.out;
    RunResult s = npfctl("status " + ifname() + " --json");
    ASSERT_EQ(s.status, kOk) << describe(s);
    EXPECT_TRUE(contains(s.out, "\"attached\"")) << s.out;
    EXPECT_FALSE(contains(s.err, "warning")) << s.err;

    RunResult d = npfctl("detach " + ifname());
    EXPECT_EQ(d.status, kOk) << describe(d);
    EXPECT_FALSE(rig().link().contains("xdp")) << rig().link().dump();
    EXPECT_FALSE(fs::exists(rig().pinDir()));
}

TEST_P(NoSysAdminTest, AForeignProgramIsUnnamedAndRemovingItNeedsSysAdmin)
{
    RunResult ip = rig().inRx("ip link set dev " + ifname() + " " + ipXdpFlag() + " obj " FOREIGN_XDP_OBJ " sec xdp");
    ASSERT_EQ(ip.status, 0) << describe(ip);
    const uint32_t foreign = rig().link()["xdp"]["prog"]["id"].get<uint32_t>();

    RunResult s = npfctl("status " + ifname() + " --json");
    ASSERT_EQ(s.status, kOk) << describe(s);
    nlohmann::json st = nlohmann::json::parse(s.out)[0];
    ASSERT_EQ(st["foreign_programs"].size(), 1u) << st.dump();
    EXPECT_EQ(st["foreign_programs"][0]["id"], foreign);
    EXPECT_EQ(st["foreign_programs"][0]["name"], "") << "read by id without CAP_SYS_ADMIN?";
    EXPECT_TRUE(contains(s.err, "name unknown: reading it needs CAP_SYS_ADMIN")) << s.err;

    RunResult forced = npfctl("attach " + ifname() + " --mode " + mode() + " --force");
    EXPECT_EQ(forced.status, kPermission) << describe(forced);
    EXPECT_TRUE(contains(forced.err, "opening a program by id needs CAP_SYS_ADMIN")) << forced.err;
    EXPECT_EQ(rig().link()["xdp"]["prog"]["id"], foreign);
    EXPECT_FALSE(fs::exists(rig().pinDir())) << "a failed attach left pins";
}

// Taking over the program on the interface opens it by id, which needs
// CAP_SYS_ADMIN; a pin of it is enough without: npf_xdp goes in front of it,
// status names it (through the pin), detach puts it back.
TEST_P(NoSysAdminTest, TakingOverNeedsSysAdminOrAPin)
{
    RunResult ip = rig().inRx("ip link set dev " + ifname() + " " + ipXdpFlag() + " obj " FOREIGN_XDP_OBJ " sec xdp");
    ASSERT_EQ(ip.status, 0) << describe(ip);
    const uint32_t foreign = rig().link()["xdp"]["prog"]["id"].get<uint32_t>();

    RunResult t = npfctl("attach " + ifname() + " --mode " + mode() + " --then-existing");
    EXPECT_EQ(t.status, kPermission) << describe(t);
    EXPECT_TRUE(contains(t.err, "opening a program by id needs CAP_SYS_ADMIN; without it, pin the program "
                                "(bpftool prog pin id " + std::to_string(foreign) + " PATH, as root) and use "
                                "--then PATH")) << t.err;
    EXPECT_EQ(rig().link()["xdp"]["prog"]["id"], foreign);
    EXPECT_FALSE(fs::exists(rig().pinDir())) << "a failed attach left pins";

    // Pinned by someone who may open it by id (root, here).
    const Pin pin{"/sys/fs/bpf/npf-itest-foreign-" + std::to_string(::getpid())};
    ASSERT_EQ(test::sh("bpftool prog pin id " + std::to_string(foreign) + " " + pin.path), 0);
    RunResult a = npfctl("attach " + ifname() + " --mode " + mode() + " --then " + pin.path);
    ASSERT_EQ(a.status, kOk) << describe(a);
    EXPECT_TRUE(contains(a.out, "chained 'itest_foreign' (prog id " + std::to_string(foreign) +
                                    ") behind npf_xdp, in its place on the interface")) << a.out;
    nlohmann::json link = rig().link();
    EXPECT_EQ(link["xdp"]["prog"]["name"], "npf_xdp") << link.dump();
    RunResult s = npfctl("status " + ifname() + " --json");
    ASSERT_EQ(s.status, kOk) << describe(s);
    nlohmann::json st = nlohmann::json::parse(s.out)[0];
    EXPECT_EQ(st["next_program"]["id"], foreign) << st.dump();
    EXPECT_EQ(st["next_program"]["name"], "itest_foreign") << st.dump();
    EXPECT_TRUE(st["foreign_programs"].empty()) << st.dump();

    RunResult d = npfctl("detach " + ifname());
    ASSERT_EQ(d.status, kOk) << describe(d);
    link = rig().link();
    EXPECT_EQ(link["xdp"]["prog"]["id"], foreign) << link.dump();
    EXPECT_EQ(link["xdp"]["mode"], ipLinkMode());
    EXPECT_FALSE(fs::exists(rig().pinDir()));
}

NPF_INSTANTIATE_MODES(NoSysAdminTest);

} // namespace
} // namespace npf::itest
