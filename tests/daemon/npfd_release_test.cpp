// npf::Client::release through npfd (root; the rig's namespaces): a release
// is a hint npfd applies on its control thread, later than the client made
// it, while the client may already have posted the same buffers again and
// received into them. Whatever the delay, a release never discards a buffer
// posted after it: its content survives eviction byte for byte. The delay is
// made real by stopping npfd's control thread with ptrace while the client
// releases, posts again and receives. And adjoining releases reach npfd as
// one request, never left behind when the flow goes idle.
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

// Releases npfd applied (its region counter `releases`, from the snapshot it
// takes every 500 ms), once there are at least `n`.
uint64_t releasesApplied(Rig& rig, uint64_t n)
{
    Counters r;
    EXPECT_TRUE(test::waitUntil([&] {
        r = rig.regionSnapshot();
        return r["releases"] >= n;
    })) << r["releases"] << " releases applied, waited for " << n;
    return r["releases"];
}

TEST_F(NpfdRelease, AdjoiningReleasesReachNpfdAsOneRequest)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    // An 8 MiB budget: releases go out in requests of 512 KiB (a 16th).
    constexpr uint64_t kBatch = 512 << 10;
    Client cli({.socket = npfd.socket(), .regionSize = 16 << 20, .residentBudget = 16 * kBatch, .name = "coalesce"});
    Flow& f = cli.openFlow(kFirstPort + 51);
    // 64 adjoining pages, under a batch: held back until a wait times out
    // with nothing (the flow is idle), then sent as one.
    for (uint64_t i = 0; i < 64; i++)
        cli.release(i * kPage, kPage);
    npf_completion c[4];
    EXPECT_EQ(f.wait(c, std::chrono::milliseconds(20)), 0);
    EXPECT_EQ(releasesApplied(rig, 1), 1u) << "64 adjoining releases, then an idle wait";
    // Two batches' worth, page by page: sent as each batch fills, no sleep needed.
    for (uint64_t i = 0; i < 2 * kBatch / kPage; i++)
        cli.release(kBatch + i * kPage, kPage);
    EXPECT_EQ(releasesApplied(rig, 3), 3u) << "two more batches";
    // One that does not adjoin sends what is held; any other request first
    // sends what is held, in order.
    cli.release(8 * kBatch, kPage);
    cli.release(12 * kBatch, kPage);
    (void)cli.stats();
    EXPECT_EQ(releasesApplied(rig, 5), 5u) << "two apart, then a stats request";
}

} // namespace
} // namespace npf::e2e
