// Credits end to end (docs/architecture.md, "Credits"): an engine's flow
// grants its sender what it has posted buffers for; npf::Sender in the peer
// namespace honours it. A receiver that keeps only a few buffers posted and
// is slow to repost loses nothing, byte for byte; many senders (each one a
// new sender to the flow) get at most one credit per NPF_CREDIT_EVERY
// datagrams, and only at their own addresses.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_fixture.h"
#include "slow_receiver.h"
#include "npf/sender.h"
#include "sys/fd.h"

namespace npf::e2e {
namespace {

constexpr uint16_t kPort = 7400;

// A Sender made in the peer namespace (its socket stays there).
std::unique_ptr<npf::Sender> senderIn(Rig& rig, SenderConfig cfg)
{
    test::NetnsGuard in(rig.veth().txNs());
    return std::make_unique<npf::Sender>(cfg);
}

TEST_F(EngineE2E, CreditsHoldASenderToThePostedBuffersOfASlowReceiver)
{
    Rig rig;
    constexpr uint32_t kSize = 1000, kBuf = 1024, kSlots = 256, kCount = 6000;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& flow = eng->openFlow(kPort, FlowOptions{.credits = {.enabled = true, .step = 16}});
    auto tx = senderIn(rig, {.to = rig.rxAddr(), .port = kPort, .initialWindow = 32,
                             .timeout = std::chrono::milliseconds(20000)});
    // Only kSlots buffers are ever outstanding, reposted as they complete.
    const SlowReceiverResult r = runSlowReceiver(flow, eng->region(), *tx, kCount, kSize, kBuf, kSlots);
    expectHeldToPostedBuffers(r, flow.stats(), kCount, kSlots);
    // Every credit reaches the sender (the last ones after its last send),
    // and nothing else counts as one.
    EXPECT_TRUE(test::waitUntil([&] {
        tx->pollCredits();
        return tx->stats().credits == flow.stats().creditsSent;
    })) << tx->stats().credits << " credits heard of " << flow.stats().creditsSent;
    const SenderStats s = tx->stats();
    EXPECT_EQ(s.sent, kCount);
    EXPECT_EQ(s.ignored, 0u);
    // npfctl shows the flow's credit counters from the engine's snapshot
    // (written every 500 ms): the same as Flow::stats() once it has caught up
    // (the credit thread's last grant for the reposted buffers comes late).
    FlowStats now;
    nlohmann::json row;
    EXPECT_TRUE(test::waitUntil(
        [&] {
            const nlohmann::json j =
                nlohmann::json::parse(rig.npfctl("flow list " + rig.rxIf() + " --json"), nullptr, false);
            if (!j.is_object() || !j["flows"].is_array() || j["flows"].empty())
                return false;
            row = j["flows"][0];
            now = flow.stats();
            return row["engine"].is_object() && row["engine"]["credits_sent"] == now.creditsSent &&
                   row["engine"]["credit_limit"] == now.creditLimit && row["engine"]["completed_ok"] == kCount;
        },
        test::kDeadline, std::chrono::milliseconds(50)))
        << row.dump();
    EXPECT_EQ(row["port"], kPort);
    EXPECT_EQ(row["engine"]["credits"], true);
    EXPECT_EQ(row["engine"]["credit_waits"], now.creditWaits);
    // The snapshot holds every flow's counters: root's (npfctl's) only.
    struct stat st{};
    ASSERT_EQ(::stat((rig.runDir() + "/engine.json").c_str(), &st), 0) << strerror(errno);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Forty senders (forty source ports, each a new sender to the flow) send 16
// datagrams each, interleaved: credits go only to them (what they read adds
// up to what the engine sent), and never more than one per
// NPF_CREDIT_EVERY datagrams received.
TEST_F(EngineE2E, CreditsGoOnlyToSendersAndAreBoundedByWhatArrived)
{
    Rig rig;
    constexpr uint32_t kSenders = 40, kEach = 16;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& flow = eng->openFlow(kPort, FlowOptions{.credits = {.enabled = true, .step = 1,
                                                              .interval = std::chrono::microseconds(1)}});
    for (uint32_t i = 0; i < 2048; i++)
        ASSERT_TRUE(flow.post(uint64_t(i) * 2048, 2048));
    flow.flush();
    std::vector<Fd> socks;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(kPort);
    ASSERT_EQ(inet_pton(AF_INET, rig.rxAddr().c_str(), &to.sin_addr), 1);
    {
        test::NetnsGuard in(rig.veth().txNs());
        for (uint32_t k = 0; k < kSenders; k++) {
            socks.emplace_back(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
            ASSERT_TRUE(socks.back());
        }
    }
    const std::vector<uint8_t> payload(100, 0x5a);
    for (uint32_t round = 0; round < kEach; round++)
        for (auto& s : socks) {
            ASSERT_EQ(::sendto(s.get(), payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
                      ssize_t(payload.size()));
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    FlowStats f;
    ASSERT_TRUE(test::waitUntil([&] {
        npf_completion c[64];
        while (flow.poll(c) > 0) {
        }
        f = flow.stats();
        return f.completedOk == kSenders * kEach;
    }));
    // The credit thread's last look (it runs on its own).
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f = flow.stats();
    uint64_t heard = 0;
    for (auto& s : socks) {
        npf_credit m;
        while (::recv(s.get(), &m, sizeof m, MSG_DONTWAIT) == ssize_t(sizeof m)) {
            EXPECT_EQ(ntohl(m.magic), uint32_t(NPF_CREDIT_MAGIC));
            EXPECT_EQ(ntohs(m.port), kPort);
            heard++;
        }
    }
    EXPECT_GT(f.creditsSent, 0u);
    EXPECT_LE(f.creditsSent, uint64_t(kSenders) * kEach / NPF_CREDIT_EVERY);
    EXPECT_EQ(heard, f.creditsSent) << "a credit went somewhere no datagram came from";
}

} // namespace
} // namespace npf::e2e
