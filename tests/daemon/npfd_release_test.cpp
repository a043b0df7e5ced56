// npf::Client::release through npfd (root; the rig's namespaces): a release
// is a hint npfd applies on its control thread, later than the client made
// it, while the client may already have posted the same buffers again and
// received into them. Whatever the delay, a release never discards a buffer
// posted after it: its content survives eviction byte for byte. The delay is
// made real by stopping npfd's control thread with ptrace while the client
// releases, posts again and receives.
#include <gtest/gtest.h>

#include <cstring>

#include "engine_fixture.h"
#include "npf/client.h"
#include "npfd_rig.h"
#include "thread_freeze.h"

namespace npf::e2e {
namespace {

class NpfdRelease : public EngineE2E {};

constexpr uint32_t kBytes = 1000;
constexpr uint64_t kPage = 4096;
constexpr uint32_t kBuffers = 4; // posted again after the release
constexpr uint32_t kConsumed = 8; // released: these and 4 more
uint32_t datagramSize(uint32_t) { return kBytes; }

TEST_F(NpfdRelease, AReleaseAppliedLateNeverDiscardsABufferPostedAfterIt)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const uint16_t port = kFirstPort + 50;
    constexpr uint64_t kRegion = 1 << 20, kBudget = 8 * kPage;
    Client cli({.socket = npfd.socket(), .regionSize = kRegion, .residentBudget = kBudget, .name = "release"});
    Flow& f = cli.openFlow(port);
    auto post = [&](uint32_t n) {
        for (uint32_t i = 0; i < n; i++)
            ASSERT_TRUE(f.post(i * kPage, kPage));
        f.flush();
    };
    // Round 1: received and consumed.
    post(kConsumed);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 1, .count = kConsumed, .dstPort = port, .size = datagramSize}),
              "");
    npf_completion c[kConsumed];
    ASSERT_EQ(awaitCompletions(f, c), kConsumed) << npfd.log();
    {
        // npfd's control thread (its main thread) stopped: the release waits
        // in the socket while the client posts the first buffers again and
        // receives round 2 into them (the pagers and workers run on).
        test::ThreadFreeze frozen(npfd.pid(), npfd.pid());
        cli.release(0, kConsumed * kPage);
        post(kBuffers);
        ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 2, .count = kBuffers, .dstPort = port, .size = datagramSize}),
                  "");
        ASSERT_EQ(awaitCompletions(f, std::span(c, kBuffers)), kBuffers) << npfd.log();
    }
    (void)cli.stats(); // answered after the release: it has been applied
    // Evict round 2's pages: populate other pages, budget by budget.
    for (uint64_t off = 16 * kPage; off < 16 * kPage + 8 * kBudget; off += kBudget)
        (void)cli.populate(off, kBudget);
    ASSERT_GE(cli.stats().evicted, kBuffers) << "nothing was evicted: the test proves nothing";
    for (uint32_t i = 0; i < kBuffers; i++) {
        const std::vector<uint8_t> want = payloadFor(senderId(2, i), kBytes);
        EXPECT_EQ(std::memcmp(cli.region() + i * kPage, want.data(), kBytes), 0)
            << "buffer " << i << " (posted after the release, received into, not yet read) lost its content";
    }
    // The rest of the range was released all the same: discarded, not saved.
    const std::vector<uint8_t> zeros(kBytes, 0);
    for (uint32_t i = kBuffers; i < kConsumed; i++)
        EXPECT_EQ(std::memcmp(cli.region() + i * kPage, zeros.data(), kBytes), 0)
            << "buffer " << i << " (released, not posted again) was saved and restored";
}

} // namespace
} // namespace npf::e2e
