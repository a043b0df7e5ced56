// A sender held to what a slow application has posted (credits, e2e): the
// application keeps `slots` buffers of `buf` bytes posted in `flow`, checks
// every payload in order against payloadFor(k, size) and reposts its buffer,
// pausing after each batch, while `tx` sends `count` datagrams from another
// thread. Shared by the engine's and npfd's credits tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "e2e_rig.h"
#include "npf/abi.h"
#include "npf/engine.h"
#include "npf/stats.h"
#include "npf/sender.h"

namespace npf::e2e {

struct SlowReceiverResult {
    int64_t sent = -1;     // what tx->send returned
    uint32_t completed = 0, notOk = 0, bad = 0; // completions; not OK or not kSize; payload differs
    std::string failure;   // a flow or post failure ("" none)
};

inline SlowReceiverResult runSlowReceiver(Flow& flow, const uint8_t* region, npf::Sender& tx, uint32_t count,
                                          uint32_t size, uint32_t buf, uint32_t slots)
{
    SlowReceiverResult r;
    for (uint32_t i = 0; i < slots; i++)
        if (!flow.post(uint64_t(i) * buf, buf, i)) {
            r.failure = "post " + std::to_string(i);
            return r;
        }
    flow.flush();
    std::vector<std::vector<uint8_t>> payloads;
    for (uint32_t k = 0; k < count; k++)
        payloads.push_back(payloadFor(k, size));
    std::thread sending([&] {
        std::vector<std::span<const uint8_t>> d(payloads.begin(), payloads.end());
        r.sent = tx.send(d);
    });
    npf_completion c[64];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (r.completed < count && r.failure.empty() && std::chrono::steady_clock::now() < deadline) {
        const int n = flow.wait(c, std::chrono::milliseconds(100));
        if (n < 0) {
            r.failure = "wait: " + flow.failure();
            break;
        }
        for (int i = 0; i < n && r.completed < count; i++, r.completed++) {
            if (c[i].status != NPF_CS_OK || c[i].len != size) {
                r.notOk++;
                continue;
            }
            if (std::memcmp(region + c[i].offset, payloads[r.completed].data(), size) != 0)
                r.bad++;
            if (!flow.post(c[i].offset, buf, c[i].cookie))
                r.failure = "repost at completion " + std::to_string(r.completed);
        }
        flow.flush();
        if (n > 0)
            std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    sending.join();
    return r;
}

// What a sender held to the posted buffers leaves (`f`: the flow's stats
// after runSlowReceiver): all `count` sent and completed OK, byte for byte,
// in order; no datagram without a buffer (drop_rnr); credits within their
// bounds, the grant never past the posted buffers.
inline void expectHeldToPostedBuffers(const SlowReceiverResult& r, const FlowStats& f, uint32_t count, uint32_t slots)
{
    EXPECT_EQ(r.failure, "");
    EXPECT_EQ(r.sent, int64_t(count));
    EXPECT_EQ(r.completed, count);
    EXPECT_EQ(r.notOk, 0u);
    EXPECT_EQ(r.bad, 0u) << "payloads out of order or corrupt";
    EXPECT_EQ(f.xdpCount(NPF_STAT_DROP_RNR), 0u) << "a datagram found no buffer: the sender overran its credit";
    EXPECT_EQ(f.completedOk, count);
    EXPECT_GT(f.creditsSent, 0u);
    EXPECT_LE(f.creditsSent, f.claimed() / NPF_CREDIT_EVERY);
    EXPECT_LE(f.creditLimit, uint64_t(count) + slots) << "never more than the posted buffers";
}

} // namespace npf::e2e
