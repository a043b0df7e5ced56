#include "order/sequencer.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <limits>

#include "order_test_util.h"

namespace npf::test {
namespace {

using namespace std::chrono_literals;

class SequencerTest : public ::testing::Test {
protected:
    PostRing posts;
    VectorSink sink;

    // Checks out[i] is seq first + i, with the post ring's offset, for all i.
    void expectRun(uint64_t first, size_t count)
    {
        ASSERT_EQ(sink.out.size(), count);
        for (size_t i = 0; i < count; ++i) {
            EXPECT_EQ(sink.out[i].seq, first + i) << "entry " << i;
            EXPECT_EQ(sink.out[i].offset, posts.at(first + i).offset) << "entry " << i;
        }
    }
};

TEST_F(SequencerTest, InOrder)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    for (uint32_t i = 0; i < 100; ++i)
        ASSERT_EQ(s.markDone(i, 100 + i, i % 2 ? NPF_CS_TRUNCATED : NPF_CS_OK, i % 3 ? 0 : NPF_CF_FAULT), 0);
    EXPECT_EQ(s.publish(0, 100, sink), 100u);
    expectRun(0, 100);
    for (uint32_t i = 0; i < 100; ++i) {
        EXPECT_EQ(sink.out[i].len, 100 + i);
        EXPECT_EQ(sink.out[i].status, i % 2 ? NPF_CS_TRUNCATED : NPF_CS_OK);
        EXPECT_EQ(sink.out[i].flags, i % 3 ? 0 : NPF_CF_FAULT);
    }
    EXPECT_EQ(s.head(), 100u);
    const SequencerStats st = s.stats();
    EXPECT_EQ(st.ok, 50u);
    EXPECT_EQ(st.truncated, 50u);
    EXPECT_EQ(st.fault, 34u);
    EXPECT_EQ(st.lost, 0u);
}

TEST_F(SequencerTest, OutOfOrderWaitsForTheHead)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    for (uint32_t q : {5u, 3u, 4u, 1u})
        ASSERT_EQ(s.markDone(q, q, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 6, sink), 0u);
    ASSERT_EQ(s.markDone(0, 0, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 6, sink), 2u); // 0, 1; 2 still missing
    ASSERT_EQ(s.markDone(2, 2, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 6, sink), 4u);
    expectRun(0, 6);
    for (uint32_t i = 0; i < 6; ++i)
        EXPECT_EQ(sink.out[i].len, i);
}

TEST_F(SequencerTest, DuplicatesAndReplaysAreRejected)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    ASSERT_EQ(s.markDone(3, 1, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.markDone(3, 2, NPF_CS_OK, 0), -EALREADY);
    const Sequencer::Claim c = s.claim(4);
    ASSERT_EQ(c.rc, 0);
    EXPECT_EQ(s.claim(4).rc, -EALREADY);
    EXPECT_EQ(s.markDone(4, 1, NPF_CS_OK, 0), -EALREADY);
    s.complete(c.seq, 44, NPF_CS_OK, 0);
    for (uint32_t q : {0u, 1u, 2u})
        ASSERT_EQ(s.markDone(q, 1, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 5, sink), 5u);
    EXPECT_EQ(sink.out[3].len, 1u); // the first markDone of 3 wins
    EXPECT_EQ(sink.out[4].len, 44u);
    EXPECT_EQ(s.markDone(3, 1, NPF_CS_OK, 0), -ESTALE); // already published
    const SequencerStats st = s.stats();
    EXPECT_EQ(st.duplicates, 3u);
    EXPECT_EQ(st.stale, 1u);
}

struct WindowCase {
    const char* name;
    uint64_t start;
    uint32_t seq32;
    int rc;
};

class SequencerWindow : public SequencerTest, public ::testing::WithParamInterface<WindowCase> {};

TEST_P(SequencerWindow, ClassifiesAgainstTheHead)
{
    const WindowCase& wc = GetParam();
    Sequencer s(dataplane::PostSlots(posts.slots.data()), {.startSeq = wc.start});
    EXPECT_EQ(s.markDone(wc.seq32, 1, NPF_CS_OK, 0), wc.rc);
    const SequencerStats st = s.stats();
    EXPECT_EQ(st.outOfWindow, wc.rc == -ERANGE ? 1u : 0u);
    EXPECT_EQ(st.stale, wc.rc == -ESTALE ? 1u : 0u);
}

constexpr uint64_t k32 = 1ull << 32;
constexpr uint32_t W = NPF_POST_RING_SIZE;

INSTANTIATE_TEST_SUITE_P(
    Cases, SequencerWindow,
    ::testing::Values(WindowCase{"head", 0, 0, 0}, WindowCase{"last_in_window", 0, W - 1, 0},
                      WindowCase{"first_past_window", 0, W, -ERANGE},
                      WindowCase{"far_ahead", 0, 0x40000000u, -ERANGE},
                      WindowCase{"just_behind", 100, 99, -ESTALE},
                      WindowCase{"behind_across_zero", 0, 0xffffffffu, -ESTALE},
                      WindowCase{"wrap_head", k32 - 10, 0xfffffff6u, 0},
                      WindowCase{"wrap_ahead_in_window", k32 - 10, 5, 0},
                      WindowCase{"wrap_past_window", k32 - 10, W - 10, -ERANGE},
                      WindowCase{"wrap_behind", k32 + 5, 0xfffffff0u, -ESTALE}),
    [](const auto& i) { return std::string(i.param.name); });

TEST_F(SequencerTest, WindowSlidesWithTheHead)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    EXPECT_EQ(s.markDone(W + 5, 1, NPF_CS_OK, 0), -ERANGE);
    for (uint32_t q = 0; q < 10; ++q)
        ASSERT_EQ(s.markDone(q, 1, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 10, sink), 10u);
    EXPECT_EQ(s.markDone(W + 5, 7, NPF_CS_OK, 0), 0); // slot 5 reused for its next lap
    EXPECT_EQ(s.markDone(W + 10, 7, NPF_CS_OK, 0), -ERANGE);
}

TEST_F(SequencerTest, LostAfterReorderTimeout)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()), {.reorderTimeout = 5ms});
    ASSERT_EQ(s.markDone(1, 11, NPF_CS_OK, 0), 0);
    ASSERT_EQ(s.markDone(2, 12, NPF_CS_OK, 0), 0);
    const uint64_t t0 = 1000 * kMs;
    EXPECT_EQ(s.publish(t0, 3, sink), 0u); // 0 claimed but missing: first seen at t0
    EXPECT_EQ(s.nextDeadline(), t0 + 5 * kMs);
    EXPECT_EQ(s.publish(t0 + 5 * kMs - 1, 3, sink), 0u);
    EXPECT_EQ(s.publish(t0 + 5 * kMs, 3, sink), 3u);
    expectRun(0, 3);
    EXPECT_EQ(sink.out[0].status, NPF_CS_LOST);
    EXPECT_EQ(sink.out[0].len, 0u);
    EXPECT_EQ(sink.out[1].len, 11u);
    EXPECT_EQ(sink.out[2].len, 12u);
    // The packet shows up after all: refused, so it cannot be placed.
    EXPECT_EQ(s.claim(0).rc, -ESTALE);
    const SequencerStats st = s.stats();
    EXPECT_EQ(st.lost, 1u);
    EXPECT_EQ(st.lostTimeout, 1u);
    EXPECT_EQ(st.ok, 2u);
    EXPECT_EQ(st.stale, 1u);
}

TEST_F(SequencerTest, TimeoutCountsFromFirstSeenClaimed)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    EXPECT_EQ(s.publish(0, 0, sink), 0u);            // nothing claimed yet
    EXPECT_EQ(s.publish(10 * kMs, 1, sink), 0u);     // seq 0 claimed, first seen at 10 ms
    EXPECT_EQ(s.publish(11 * kMs - 1, 1, sink), 0u); // not yet
    EXPECT_EQ(s.publish(11 * kMs - 1, 2, sink), 0u); // seq 1 first seen now
    EXPECT_EQ(s.publish(11 * kMs, 2, sink), 1u);     // seq 0 lost, seq 1 still waits
    EXPECT_EQ(s.nextDeadline(), 12 * kMs - 1);
    EXPECT_EQ(s.publish(12 * kMs - 1, 2, sink), 1u);
    expectRun(0, 2);
    EXPECT_EQ(sink.out[1].status, NPF_CS_LOST);
}

TEST_F(SequencerTest, BurstLossCostsOneTimeout)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    ASSERT_EQ(s.markDone(100, 5, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 101, sink), 0u);
    EXPECT_EQ(s.publish(1 * kMs, 101, sink), 101u);
    expectRun(0, 101);
    for (size_t i = 0; i < 100; ++i)
        EXPECT_EQ(sink.out[i].status, NPF_CS_LOST);
    EXPECT_EQ(sink.out[100].status, NPF_CS_OK);
}

TEST_F(SequencerTest, ClaimedSeqIsNeverDeclaredLost)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    const Sequencer::Claim c = s.claim(0); // e.g. the pager took it from the backup ring
    ASSERT_EQ(c.rc, 0);
    EXPECT_EQ(s.publish(0, 1, sink), 0u);
    EXPECT_EQ(s.publish(1000 * kMs, 1, sink), 0u);
    s.complete(c.seq, 9, NPF_CS_OK, NPF_CF_FAULT);
    EXPECT_EQ(s.publish(1000 * kMs, 1, sink), 1u);
    EXPECT_EQ(sink.out[0].status, NPF_CS_OK);
    EXPECT_EQ(sink.out[0].flags, NPF_CF_FAULT);
}

TEST_F(SequencerTest, TailLoss)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    for (uint32_t q = 0; q < 10; ++q)
        ASSERT_EQ(s.markDone(q, 1, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 15, sink), 10u);
    EXPECT_EQ(s.publish(1 * kMs, 15, sink), 5u);
    expectRun(0, 15);
    for (size_t i = 10; i < 15; ++i)
        EXPECT_EQ(sink.out[i].status, NPF_CS_LOST);
    // Unclaimed seqs are never LOST, however long we wait.
    EXPECT_EQ(s.publish(1000 * kMs, 15, sink), 0u);
    EXPECT_EQ(s.head(), 15u);
}

TEST_F(SequencerTest, StaleClaimedConsIsIgnored)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    EXPECT_EQ(s.publish(0, 3, sink), 0u);
    EXPECT_EQ(s.publish(1 * kMs, 1, sink), 3u); // a stale cons does not un-claim 1, 2
}

TEST_F(SequencerTest, WrapsPast32Bits)
{
    const uint64_t start = k32 - 100;
    Sequencer s(dataplane::PostSlots(posts.slots.data()), {.startSeq = start});
    uint64_t next = start;
    for (int round = 0; round < 3; ++round) {
        // Mark 150 in reverse, so the head waits until the last one.
        for (uint64_t q = next + 149; q + 1 > next; --q) {
            ASSERT_EQ(s.markDone(static_cast<uint32_t>(q), static_cast<uint32_t>(q % 1000),
                                 NPF_CS_OK, 0),
                      0)
                << q;
            if (q != next) {
                ASSERT_EQ(s.publish(0, next + 150, sink), 0u);
            }
        }
        ASSERT_EQ(s.publish(0, next + 150, sink), 150u);
        next += 150;
    }
    expectRun(start, 450);
    for (size_t i = 0; i < 450; ++i)
        EXPECT_EQ(sink.out[i].len, (start + i) % 1000);
    EXPECT_EQ(s.head(), k32 + 350);
}

TEST_F(SequencerTest, Wraps64BitHead)
{
    const uint64_t start = std::numeric_limits<uint64_t>::max() - 2 * W;
    Sequencer s(dataplane::PostSlots(posts.slots.data()), {.startSeq = start});
    const uint64_t n = 3 * W;
    for (uint64_t k = 0; k < n; ++k) {
        const uint64_t q = start + k;
        if (k % 5 == 2) // never arrives
            continue;
        ASSERT_EQ(s.markDone(static_cast<uint32_t>(q), 1, NPF_CS_OK, 0), 0) << k;
        s.publish(k * kMs, q + 1, sink);
    }
    s.publish(n * kMs, start + n, sink); // the last seq is first seen claimed here
    s.publish(n * kMs + kMs, start + n, sink);
    expectRun(start, n);
    for (uint64_t k = 0; k < n; ++k)
        EXPECT_EQ(sink.out[k].status, k % 5 == 2 ? NPF_CS_LOST : NPF_CS_OK) << k;
    EXPECT_EQ(s.head(), start + n);
    EXPECT_EQ(s.markDone(static_cast<uint32_t>(start + n - 1), 1, NPF_CS_OK, 0), -ESTALE); // lost
    EXPECT_EQ(s.markDone(static_cast<uint32_t>(start + n - 2), 1, NPF_CS_OK, 0), -ESTALE); // replay
}

TEST_F(SequencerTest, FullSinkKeepsCompletionsUntilThereIsRoom)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    sink.capacity = 10;
    for (uint32_t q = 0; q < 30; ++q)
        ASSERT_EQ(s.markDone(q, q, NPF_CS_OK, 0), 0);
    EXPECT_EQ(s.publish(0, 40, sink), 10u);
    EXPECT_EQ(s.stats().ringFull, 1u);
    EXPECT_EQ(s.publish(50 * kMs, 40, sink), 0u); // still full; lost ones wait too
    EXPECT_EQ(s.stats().ringFull, 2u);
    EXPECT_EQ(s.head(), 10u);
    sink.capacity = 25;
    EXPECT_EQ(s.publish(50 * kMs, 40, sink), 15u);
    sink.capacity = SIZE_MAX;
    EXPECT_EQ(s.publish(50 * kMs, 40, sink), 15u); // 25..29 ok, 30..39 lost
    expectRun(0, 40);
    for (uint32_t i = 0; i < 40; ++i) {
        EXPECT_EQ(sink.out[i].status, i < 30 ? NPF_CS_OK : NPF_CS_LOST);
        EXPECT_EQ(sink.out[i].len, i < 30 ? i : 0u);
    }
}

TEST_F(SequencerTest, RejectsBadStatusAndClampsLen)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    EXPECT_EQ(s.markDone(0, 1, 7, 0), -EINVAL);
    ASSERT_EQ(s.markDone(0, 100000, NPF_CS_OK, 0), 0);
    ASSERT_EQ(s.markDone(1, 100, NPF_CS_LOST, 0), 0); // a worker may give up on a seq
    EXPECT_EQ(s.publish(0, 2, sink), 2u);
    EXPECT_EQ(sink.out[0].len, posts.at(0).len);
    EXPECT_EQ(sink.out[1].len, 0u);
    EXPECT_EQ(sink.out[1].status, NPF_CS_LOST);
    const SequencerStats st = s.stats();
    EXPECT_EQ(st.invalid, 2u);
    EXPECT_EQ(st.lost, 1u);
    EXPECT_EQ(st.lostTimeout, 0u);
}

TEST_F(SequencerTest, LatencyHistogram)
{
    Sequencer s(dataplane::PostSlots(posts.slots.data()));
    ASSERT_EQ(s.markDone(0, 1, NPF_CS_OK, 0, 1000), 0);
    ASSERT_EQ(s.markDone(1, 1, NPF_CS_OK, 0), 0); // no timestamp: not recorded
    EXPECT_EQ(s.publish(1000 + 5000, 2, sink), 2u);
    const SequencerStats st = s.stats();
    EXPECT_EQ(st.latency.count(), 1u);
    EXPECT_EQ(st.latency.max(), 5000u);
    EXPECT_EQ(st.latency.p50(), 5000u);
}

TEST(SequencerCtor, RejectsMissingPostRing)
{
    EXPECT_THROW(Sequencer{dataplane::PostSlots{}}, std::system_error);
}

} // namespace
} // namespace npf::test
