// Engine lifetime: it detaches what it attached, whichever thread or network
// namespace destroys it; it never detaches what npfctl attached.
#include <filesystem>

#include "engine_fixture.h"

namespace npf::e2e {
namespace {

bool attached(Rig& rig) { return rig.statusJson().find("\"state\":\"attached\"") != std::string::npos; }

TEST_F(EngineE2E, DetachesOnlyWhatItAttached)
{
    Rig rig;
    {
        EngineInNs eng(rig, {.regionSize = 16ull << 20});
        EXPECT_TRUE(eng->attachedByUs());
        EXPECT_TRUE(attached(rig));
    }
    EXPECT_FALSE(attached(rig)) << "the engine attached npf_xdp, so it must detach it: " << rig.statusJson();
    EXPECT_FALSE(std::filesystem::exists(test::pinDirOf(rig.veth().rxNs(), rig.rxIf())));

    int rc = -1;
    rig.npfctl("attach " + rig.rxIf(), &rc);
    ASSERT_EQ(rc, 0);
    {
        EngineInNs eng(rig, {.regionSize = 16ull << 20});
        EXPECT_FALSE(eng->attachedByUs());
    }
    EXPECT_TRUE(attached(rig)) << "npfctl attached npf_xdp: the engine must leave it";
}

// The engine is built in the rx namespace (where its interface is) and
// destroyed from the test's own namespace, as an application that setns()
// only around construction would do. ctl::detach(ifname) resolves the name
// in the destroying thread's namespace: the program and pins stay behind
// (and an interface of the same name there would be detached instead).
TEST_F(EngineE2E, DetachesWhatItAttachedWhenDestroyedInAnotherNetns)
{
    Rig rig;
    std::unique_ptr<Engine> eng;
    {
        test::NetnsGuard in(rig.veth().rxNs());
        eng = std::make_unique<Engine>(EngineConfig{.ifname = rig.rxIf(), .regionSize = 16ull << 20});
    }
    ASSERT_TRUE(eng->attachedByUs());
    eng.reset();
    EXPECT_FALSE(attached(rig)) << "engine destroyed outside its netns left npf_xdp attached: "
                                << rig.statusJson();
}

// A start that fails after the engine attached the program (here: more
// queues than the program serves) must not leave the program attached.
TEST_F(EngineE2E, FailedStartDetachesWhatItAttached)
{
    Rig rig;
    test::NetnsGuard in(rig.veth().rxNs());
    try {
        Engine eng(EngineConfig{.ifname = rig.rxIf(), .queues = 5, .regionSize = 16ull << 20});
        FAIL() << "5 queues on a 1-queue veth must not start";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find("queues"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(attached(rig)) << "a failed start left npf_xdp attached: " << rig.statusJson();
    EXPECT_FALSE(std::filesystem::exists(test::pinDirOf(rig.veth().rxNs(), rig.rxIf())));
}

} // namespace
} // namespace npf::e2e
