// Credits through npfd in brokered mode: a client's flow opened with credits
// (open_flow's credit_step, credit_interval_us) gets them sent by npfd's
// service, from npfd's socket in the interface's namespace; npf::Sender in
// the peer namespace honours them. A client that keeps only a few buffers
// posted and reposts slowly loses nothing, byte for byte; the client's
// Flow::stats() (flow_stats) and `npfctl flow list` (npfd's snapshot) show
// the same credit counters.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_fixture.h"
#include "npf/client.h"
#include "npf/sender.h"
#include "npfd_rig.h"
#include "slow_receiver.h"
#include "wait.h"

namespace npf::e2e {
namespace {

class NpfdCredits : public EngineE2E {};

TEST_F(NpfdCredits, BrokeredFlowHoldsItsSenderToThePostedBuffers)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    constexpr uint16_t kPort = kFirstPort + 40;
    constexpr uint32_t kSize = 1000, kBuf = 1024, kSlots = 256, kCount = 4000;
    Client cli({.socket = npfd.socket(), .mode = ClientMode::Brokered, .regionSize = 4 << 20, .name = "credits"});
    Flow& flow = cli.openFlow(kPort, FlowOptions{.credits = {.enabled = true, .step = 16}});
    std::unique_ptr<npf::Sender> tx;
    {
        test::NetnsGuard in(rig.veth().txNs());
        tx = std::make_unique<npf::Sender>(SenderConfig{.to = rig.rxAddr(), .port = kPort, .initialWindow = 32,
                                                        .timeout = std::chrono::milliseconds(20000)});
    }
    const SlowReceiverResult r = runSlowReceiver(flow, cli.region(), *tx, kCount, kSize, kBuf, kSlots);
    expectHeldToPostedBuffers(r, flow.stats(), kCount, kSlots);

    // The sender hears every credit npfd sent; npfctl shows the same counts
    // from npfd's snapshot (every 500 ms) once both have caught up.
    FlowStats now;
    nlohmann::json row;
    EXPECT_TRUE(test::waitUntil(
        [&] {
            tx->pollCredits();
            now = flow.stats();
            if (tx->stats().credits != now.creditsSent)
                return false;
            const nlohmann::json j =
                nlohmann::json::parse(rig.npfctl("flow list " + rig.rxIf() + " --json"), nullptr, false);
            if (!j.is_object() || !j["flows"].is_array())
                return false;
            for (const auto& r : j["flows"])
                if (r["port"] == kPort)
                    row = r;
            return row.is_object() && row["engine"].is_object() && row["engine"]["credits_sent"] == now.creditsSent &&
                   row["engine"]["completed_ok"] == kCount;
        },
        test::kDeadline, std::chrono::milliseconds(50)))
        << tx->stats().credits << " credits heard of " << now.creditsSent << "; npfctl: " << row.dump();
    EXPECT_EQ(row["engine"]["credits"], true);
    EXPECT_EQ(row["engine"]["credit_waits"], now.creditWaits);
    EXPECT_EQ(tx->stats().ignored, 0u);
}

} // namespace
} // namespace npf::e2e
