// Interfaces come and go: one that is deleted under a running npf-recv stops
// it with a clear error and exit code 4 and leaves no pins it created behind
// (npfctl shows and removes the ones it did not create), and same-named
// interfaces in two network namespaces each run an instance at once.
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine_fixture.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr uint16_t kPort = 7500;

// Runs npf-recv on the rig's interface, deletes the interface, and returns
// npf-recv's exit status and stderr.
std::pair<int, std::string> recvThenDeleteLink(Rig& rig, const std::string& dir)
{
    const std::string err = dir + "/err";
    Child recv(rig.veth().rxNs().path(), {NPF_RECV_PATH, rig.rxIf(), std::to_string(kPort), "-o", dir + "/out"},
               err, true);
    EXPECT_TRUE(recv.ready());
    EXPECT_EQ(test::sh(rig.veth().rxNs().exec() + "ip link del " + rig.rxIf()), 0);
    int st = -1;
    EXPECT_TRUE(recv.wait(int(test::kDeadline.count()), &st)) << "npf-recv kept running after its interface was deleted:\n"
                                       << readFile(err);
    return {st, readFile(err)};
}

TEST_F(EngineE2E, NpfRecvStopsWhenItsInterfaceIsDeletedAndRemovesItsPins)
{
    Rig rig;
    TempDir dir;
    const std::string pins = rig.pinDir();
    const std::string run = rig.runDir();
    auto [st, err] = recvThenDeleteLink(rig, dir.path);
    EXPECT_EQ(st, 4) << err; // npfctl's "no such interface"
    EXPECT_NE(err.find("is gone"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(pins)) << "npf-recv attached npf, so it must remove the pins it created:\n" << err;
    EXPECT_FALSE(fs::exists(run)) << "engine snapshot left behind";
}

TEST_F(EngineE2E, PinsOfADeletedInterfaceAreShownAndRemovedByDetachForce)
{
    Rig rig;
    TempDir dir;
    ASSERT_TRUE(rig.npfctlOk("attach " + rig.rxIf()));
    const std::string pins = rig.pinDir();
    auto [st, err] = recvThenDeleteLink(rig, dir.path);
    EXPECT_EQ(st, 4) << err;
    EXPECT_TRUE(fs::exists(pins)) << "npfctl attached npf: its pins are the operator's to remove";

    int rc = -1;
    const std::string all = rig.npfctl("status --json", &rc);
    EXPECT_EQ(rc, 0) << all;
    bool listed = false;
    for (const auto& s : nlohmann::json::parse(all))
        if (s["interface"] == rig.rxIf()) {
            listed = true;
            EXPECT_EQ(s["state"], "gone") << s.dump();
        }
    EXPECT_TRUE(listed) << all;
    std::string one = rig.npfctl("status " + rig.rxIf(), &rc);
    EXPECT_EQ(rc, 0) << one;
    EXPECT_NE(one.find("gone"), std::string::npos) << one;

    rig.npfctl("detach " + rig.rxIf(), &rc);
    EXPECT_EQ(rc, 4) << "without --force, a missing interface is an error";
    EXPECT_TRUE(rig.npfctlOk("detach --force " + rig.rxIf()));
    EXPECT_FALSE(fs::exists(pins));
}

uint32_t size300(uint32_t) { return 300; }

// Two pods, each with an interface of the same name: two instances at once.
TEST_F(EngineE2E, SameNamedInterfacesInTwoNamespacesServeAtOnce)
{
    Rig a, b;
    const std::string name = test::uniqueName("npfs");
    for (Rig* r : {&a, &b}) {
        const std::string in = r->veth().rxNs().exec();
        ASSERT_EQ(test::sh(in + "ip link set " + r->rxIf() + " down && " + in + "ip link set " + r->rxIf() +
                           " name " + name + " && " + in + "ip link set " + name + " up"),
                  0);
    }
    auto engineIn = [&](Rig& r) {
        test::NetnsGuard in(r.veth().rxNs());
        return std::make_unique<Engine>(EngineConfig{.ifname = name, .regionSize = 16ull << 20});
    };
    std::unique_ptr<Engine> ea = engineIn(a), eb = engineIn(b);
    EXPECT_NE(test::pinDirOf(a.veth().rxNs(), name), test::pinDirOf(b.veth().rxNs(), name));
    Flow& fa = ea->openFlow(kPort);
    Flow& fb = eb->openFlow(kPort);
    Checker ca(*ea, fa, {.stride = 2048, .depth = 256}, size300, true);
    Checker cb(*eb, fb, {.stride = 2048, .depth = 256}, size300, true);
    ca.postInitial();
    cb.postInitial();
    constexpr uint32_t kCount = 2000;
    Sender ta(a.veth(), {.sender = 0, .count = kCount, .dstPort = kPort, .size = size300, .window = ca.window(),
                         .done = ca.done()});
    Sender tb(b.veth(), {.sender = 0, .count = kCount, .dstPort = kPort, .size = size300, .window = cb.window(),
                         .done = cb.done()});
    ta.start();
    tb.start();
    std::thread pumpB([&] { cb.pumpUntil(kCount); });
    ca.pumpUntil(kCount);
    pumpB.join();
    ta.join();
    tb.join();
    ASSERT_EQ(ta.error(), "");
    ASSERT_EQ(tb.error(), "");
    for (Checker* c : {&ca, &cb}) {
        const CheckTotals& t = c->totals();
        EXPECT_EQ(t.failures, 0u) << t.firstFailures;
        EXPECT_EQ(t.verified, kCount);
    }
    for (auto [r, e] : {std::pair{&a, &ea}, std::pair{&b, &eb}}) {
        test::NetnsGuard in(r->veth().rxNs());
        e->reset();
        EXPECT_FALSE(fs::exists(test::pinDirOf(r->veth().rxNs(), name)));
    }
}

} // namespace
} // namespace npf::e2e
