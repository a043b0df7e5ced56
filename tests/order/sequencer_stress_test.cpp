// Sequencer under concurrency and randomized loss/reorder, checked against
// the ordering invariants.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "order/completion_ring.h"
#include "order/sequencer.h"
#include "order_test_util.h"

namespace npf::test {
namespace {

using namespace std::chrono_literals;

uint32_t lenOf(uint64_t seq) { return static_cast<uint32_t>((seq * 2654435761u) % 1400); }
uint16_t statusOf(uint64_t seq) { return seq % 11 == 0 ? NPF_CS_TRUNCATED : NPF_CS_OK; }
uint16_t flagsOf(uint64_t seq) { return seq % 13 == 0 ? NPF_CF_FAULT : 0; }

// Three workers claim seqs from a shared cursor (like XDP on two queues plus
// the pager) and mark them done; a publisher pushes into a real completion
// ring and, as the application, consumes and reposts. Start near 2^32 so the
// run crosses the 32-bit wrap.
TEST(SequencerConcurrent, ThreeWorkersOnePublisher)
{
    constexpr uint64_t kStart = (1ull << 32) - 1'000'000;
    constexpr uint64_t kCount = 3'000'000;
    PostRing posts;
    Sequencer seq(dataplane::PostSlots(posts.slots.data()), {.startSeq = kStart, .reorderTimeout = 1h});
    CompletionRing ring = CompletionRing::create(1024, "stress");
    CompletionProducer producer(ring);
    CompletionConsumer consumer(ring);

    std::atomic<uint64_t> cons{kStart};               // XDP's flow cursor
    std::atomic<uint64_t> prod{kStart + NPF_POST_RING_SIZE}; // posted by the app
    std::atomic<uint64_t> rejected{0};
    const uint64_t end = kStart + kCount;

    auto worker = [&](int id) {
        std::minstd_rand rng(id);
        for (;;) {
            uint64_t c = cons.load(std::memory_order_acquire);
            if (c >= end)
                return;
            if (c >= prod.load(std::memory_order_acquire)) {
                std::this_thread::yield();
                continue;
            }
            if (!cons.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel))
                continue;
            if (rng() % 4096 == 0)
                std::this_thread::yield(); // let others overtake this seq
            if (seq.markDone(static_cast<uint32_t>(c), lenOf(c), statusOf(c), flagsOf(c)) != 0)
                rejected.fetch_add(1);
        }
    };

    uint64_t expect = kStart, bad = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::thread publisher([&] {
        std::vector<npf_completion> buf(256);
        while (expect < end) {
            seq.publish(0, cons.load(std::memory_order_acquire), producer);
            const size_t n = consumer.poll(buf.size(), buf.data());
            for (size_t i = 0; i < n; ++i) {
                const npf_completion& c = buf[i];
                if (c.seq != expect || c.len != lenOf(c.seq) || c.status != statusOf(c.seq) ||
                    c.flags != flagsOf(c.seq) || c.offset != posts.at(c.seq).offset) {
                    if (++bad < 10)
                        ADD_FAILURE() << "got seq " << c.seq << " len " << c.len << " status "
                                      << c.status << ", expected seq " << expect;
                }
                expect = c.seq + 1;
            }
            prod.store(std::min(expect + NPF_POST_RING_SIZE, end), std::memory_order_release);
            if (!n)
                std::this_thread::yield();
        }
    });
    std::vector<std::thread> workers;
    for (int i = 0; i < 3; ++i)
        workers.emplace_back(worker, i + 1);
    for (auto& w : workers)
        w.join();
    publisher.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(expect, end);
    EXPECT_EQ(rejected.load(), 0u);
    EXPECT_EQ(seq.head(), end);
    const SequencerStats st = seq.stats();
    EXPECT_EQ(st.ok + st.truncated, kCount);
    EXPECT_EQ(st.lost, 0u);
    EXPECT_EQ(producer.stats().pushed, kCount);
    std::printf("[ info ] %llu seqs, 3 workers + publisher/consumer: %.2f s, %.2f M seqs/s, ring full %llu\n",
                static_cast<unsigned long long>(kCount), secs, kCount / secs / 1e6,
                static_cast<unsigned long long>(st.ringFull));
}

// Single-threaded, seeded: seqs are claimed in bursts, most arrive with a
// random delay (some after their deadline), some never, some twice; the sink
// has a random capacity. Checks every published completion.
class SequencerRandom : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SequencerRandom, InvariantsHold)
{
    constexpr uint64_t kTimeout = 1 * kMs;
    const uint64_t start = GetParam() % 2 ? (1ull << 32) - 5000 : GetParam() * 977ull;
    std::mt19937_64 rng(GetParam());
    PostRing posts;
    Sequencer s(dataplane::PostSlots(posts.slots.data()),
                {.startSeq = start, .reorderTimeout = std::chrono::nanoseconds(kTimeout)});
    VectorSink sink;

    struct Arrival {
        uint64_t at;
        uint64_t seq;
    };
    std::vector<Arrival> inFlight;
    std::map<uint64_t, npf_completion> accepted; // markDone returned 0
    std::map<uint64_t, uint64_t> firstSeen;      // seq -> first publish() time with cons > seq
    uint64_t now = 0, cons = start, consumed = start, checked = 0;
    uint64_t lost = 0, late = 0, dups = 0;

    auto deliver = [&](const Arrival& a) {
        const uint32_t len = lenOf(a.seq);
        const int rc = s.markDone(static_cast<uint32_t>(a.seq), len, statusOf(a.seq), flagsOf(a.seq));
        if (rc == 0) {
            ASSERT_FALSE(accepted.count(a.seq)) << "seq " << a.seq << " accepted twice";
            ASSERT_GE(a.seq, s.head());
            accepted[a.seq] = {a.seq, posts.at(a.seq).offset, len, statusOf(a.seq), flagsOf(a.seq)};
        } else if (rc == -EALREADY) {
            ASSERT_TRUE(accepted.count(a.seq)) << "duplicate reported for new seq " << a.seq;
            ++dups;
        } else {
            ASSERT_EQ(rc, -ESTALE) << "seq " << a.seq;
            ASSERT_LT(a.seq, s.head());
            ++late;
        }
    };
    auto check = [&] {
        for (; checked < sink.out.size(); ++checked) {
            const npf_completion& c = sink.out[checked];
            const uint64_t want = start + checked;
            ASSERT_EQ(c.seq, want) << "gap or reorder";
            ASSERT_EQ(c.offset, posts.at(want).offset);
            if (auto it = accepted.find(want); it != accepted.end()) {
                ASSERT_EQ(c.len, it->second.len);
                ASSERT_EQ(c.status, it->second.status);
                ASSERT_EQ(c.flags, it->second.flags);
            } else {
                ASSERT_EQ(c.status, NPF_CS_LOST) << "seq " << want;
                ASSERT_EQ(c.len, 0u);
                ASSERT_TRUE(firstSeen.count(want));
                ASSERT_GE(now, firstSeen[want] + kTimeout) << "LOST before the timeout";
                ++lost;
            }
        }
    };

    for (int step = 0; step < 20000; ++step) {
        // XDP claims a burst (bounded by what the app has posted).
        const uint64_t prodLimit = consumed + NPF_POST_RING_SIZE;
        const uint64_t burst = std::min<uint64_t>(rng() % 40, prodLimit - cons);
        for (uint64_t k = 0; k < burst; ++k, ++cons) {
            const unsigned fate = rng() % 100;
            if (fate < 6)
                continue; // never arrives
            const uint64_t delay = rng() % 100 < 3 ? kTimeout + rng() % kTimeout : rng() % (kTimeout / 2);
            inFlight.push_back({now + delay, cons});
            if (fate < 8)
                inFlight.push_back({now + rng() % kTimeout, cons}); // duplicate
        }
        now += rng() % (kTimeout / 8);
        // Deliver what is due, in random order.
        std::shuffle(inFlight.begin(), inFlight.end(), rng);
        auto due = std::partition(inFlight.begin(), inFlight.end(),
                                  [&](const Arrival& a) { return a.at > now; });
        for (auto it = due; it != inFlight.end(); ++it) {
            deliver(*it);
            if (HasFatalFailure())
                return;
        }
        inFlight.erase(due, inFlight.end());

        for (uint64_t q = firstSeen.empty() ? start : firstSeen.rbegin()->first + 1; q < cons; ++q)
            firstSeen[q] = now;
        sink.capacity = sink.out.size() + (rng() % 8 == 0 ? 0 : rng() % 64);
        s.publish(now, cons, sink);
        check();
        if (HasFatalFailure())
            return;
        consumed = start + sink.out.size();
    }
    // Drain: everything still in flight arrives, then all claimed seqs complete.
    for (const Arrival& a : inFlight)
        deliver(a);
    now += 2 * kTimeout;
    sink.capacity = SIZE_MAX;
    s.publish(now, cons, sink);
    check();
    EXPECT_EQ(s.head(), cons);
    EXPECT_EQ(sink.out.size(), cons - start);
    const SequencerStats st = s.stats();
    EXPECT_EQ(st.lost, lost);
    EXPECT_EQ(st.lostTimeout, lost);
    EXPECT_EQ(st.ok + st.truncated, accepted.size());
    EXPECT_EQ(st.stale, late);
    EXPECT_EQ(st.duplicates, dups);
    EXPECT_GT(lost, 0u);
    EXPECT_GT(late, 0u);
    EXPECT_GT(dups, 0u);
    EXPECT_GT(st.ringFull, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SequencerRandom, ::testing::Values(1u, 2u, 3u, 4u, 5u, 6u));

} // namespace
} // namespace npf::test
