// Engine lifetime: it detaches what it attached, whichever thread or network
// namespace destroys it; it never detaches what npfctl attached.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

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
    EXPECT_FALSE(std::filesystem::exists(rig.pinDir()));

    ASSERT_TRUE(rig.npfctlOk("attach " + rig.rxIf()));
    {
        EngineInNs eng(rig, {.regionSize = 16ull << 20});
        EXPECT_FALSE(eng->attachedByUs());
    }
    EXPECT_TRUE(attached(rig)) << "npfctl attached npf_xdp: the engine must leave it";
}

// The engine is built in the rx namespace (where its interface is) and
// destroyed from the test's own namespace, as an application that setns()
// only around construction would do. dataplane::detach(ifname) resolves the name
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
    EXPECT_FALSE(std::filesystem::exists(rig.pinDir()));
}

uint32_t size200(uint32_t) { return 200; }

// An engine that starts while its flow's traffic flows (a restart): between
// binding its sockets and posting its first buffers the flow is not served,
// so XDP passes its datagrams to the kernel instead of dropping them.
TEST_F(EngineE2E, EngineStartingUnderTrafficDropsNothing)
{
    Rig rig;
    int rc = -1;
    ASSERT_TRUE(rig.npfctlOk("attach " + rig.rxIf()));
    ASSERT_TRUE(rig.npfctlOk("flow add " + rig.rxIf() + " 7600"));
    const Counters xdp0 = rig.xdp();
    const uint32_t count = 4000;
    // Flow control: the sender is at most a window ahead of what XDP passed
    // to the kernel plus what the application completed, so the application
    // (however slow this machine runs it) never runs out of posted buffers:
    // a drop_rnr can only come from the start itself.
    std::atomic<Checker*> app{nullptr};
    const uint64_t passed0 = rig.xdpStat(NPF_STAT_PASS_NO_SOCKET);
    auto throughXdp = [&]() -> uint64_t {
        Checker* c = app.load();
        return rig.xdpStat(NPF_STAT_PASS_NO_SOCKET) - passed0 + (c ? c->doneCount() : 0);
    };
    Sender tx(rig.veth(), {.count = count, .dstPort = 7600, .size = size200, .window = 128, .done = throughXdp});
    tx.start();
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    struct JoinFirst { // the sender reads `app` until it ends
        Sender& s;
        ~JoinFirst() { s.join(); }
    } joinFirst{tx};
    // Datagrams keep arriving at the bound sockets before the flow has buffers.
    const uint64_t bound = rig.xdpStat(NPF_STAT_RX_TOTAL);
    EXPECT_TRUE(test::waitUntil([&] {
        return rig.xdpStat(NPF_STAT_RX_TOTAL) >= std::min<uint64_t>(bound + 50, xdp0.at("rx_total") + count);
    }));
    Flow& flow = eng->openFlow(7600);
    Checker chk(*eng, flow, {.stride = 2048, .depth = 512}, size200);
    chk.postInitial();
    app = &chk;
    // Until every datagram sent was passed to the kernel or completed.
    EXPECT_TRUE(chk.pumpUntilSettled([&] {
        const uint64_t claimed = rig.xdpStat(NPF_STAT_REDIR_PRIMARY) + rig.xdpStat(NPF_STAT_REDIR_BACKUP) +
                                 rig.xdpStat(NPF_STAT_REDIR_FAIL);
        return tx.sent() == count && rig.xdpStat(NPF_STAT_RX_TOTAL) - xdp0.at("rx_total") == count &&
               claimed - xdp0.at("redir_primary") - xdp0.at("redir_backup") - xdp0.at("redir_fail") ==
                   chk.totals().completions;
    })) << describe(delta(rig.xdp(), xdp0));
    tx.join();
    ASSERT_EQ(tx.error(), "");
    Counters d = delta(rig.xdp(), xdp0);
    EXPECT_EQ(d["drop_rnr"], 0u) << describe(d);
    EXPECT_GE(d["pass_no_socket"], 50u) << "the test did not catch the start: " << describe(d);
    EXPECT_EQ(d["pass_no_socket"] + chk.totals().completions, tx.sent()) << describe(d);
    EXPECT_EQ(chk.totals().failures, 0u) << chk.totals().firstFailures;
    rig.npfctl("detach " + rig.rxIf(), &rc);
}

} // namespace
} // namespace npf::e2e
