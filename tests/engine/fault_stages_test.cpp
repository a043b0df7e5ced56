// The fault path's per-datagram stage histograms and its batch-size counters
// (EngineStats): every placed datagram has each stage recorded exactly once,
// so the stage counts equal fault_total's and the fault_path counter, and the
// batch counters count batches that hold those datagrams. Correctness only:
// no timing is asserted.
#include <array>
#include <cstdio>
#include <utility>

#include "engine_fixture.h"
#include "wait.h"

namespace npf::e2e {
namespace {

constexpr uint16_t kPort = 7400;
uint32_t size1472(uint32_t) { return 1472; }

// The fault path's histograms of one snapshot, fault_total last.
std::array<EngineStats::Latency, 6> faultStages(const EngineStats& s)
{
    return {s.steerToPickup, s.pickupToImage, s.imageToCopy, s.copyToComplete, s.faultCompleteToPublish, s.faultTotal};
}

// Fault-path batches as (smallest, largest datagrams) and how many.
std::array<std::pair<std::pair<uint64_t, uint64_t>, uint64_t>, 6> batchBuckets(const EngineStats& s)
{
    return {{{{1, 1}, s.faultBatches1},
             {{2, 3}, s.faultBatches2To3},
             {{4, 7}, s.faultBatches4To7},
             {{8, 15}, s.faultBatches8To15},
             {{16, 31}, s.faultBatches16To31},
             {{32, 256}, s.faultBatches32Up}}};
}

// A cold region without prefetch: nearly every datagram takes the fault
// path, one page each (buffers a page apart), from the backup ring only (no
// budget, so nothing is evicted and nothing deferred).
TEST_F(EngineE2E, FaultStagesAreRecordedOncePerDatagramAndBatchesCounted)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 64ull << 20, .prefetchDepth = 0});
    Flow& flow = eng->openFlow(kPort);
    const uint32_t count = 5000;
    Checker chk(*eng, flow, {.stride = 4096, .depth = 2048, .len = [](uint64_t) { return 1472u; }}, size1472);
    chk.postInitial();
    Stream tx(rig, chk, {.count = count, .dstPort = kPort, .size = size1472});
    ASSERT_EQ(tx.run(), "");
    EXPECT_TRUE(cleanInOrder(chk));
    // The pager times a datagram once it saw its completion published, at the
    // end of its round: the last ones may still be on their way.
    EngineStats s;
    test::waitUntil([&] {
        s = eng->stats();
        return s.faultTotal.count == s.faultPath;
    });
    ASSERT_GT(s.faultPath, count / 2) << numbers(s);
    EXPECT_EQ(s.faultTotal.count, s.faultPath) << "every fault-path datagram XDP stamped is timed once";
    for (const EngineStats::Latency& l : faultStages(s))
        EXPECT_EQ(l.count, s.faultTotal.count) << "each stage once per datagram";
    uint64_t batches = 0, least = 0, most = 0;
    for (const auto& [range, n] : batchBuckets(s)) {
        batches += n;
        least += range.first * n;
        most += range.second * n;
    }
    EXPECT_GT(batches, 0u);
    EXPECT_LE(batches, s.faultPath) << "a batch holds at least one datagram";
    EXPECT_LE(least, s.faultPath) << "the buckets' lower bounds";
    EXPECT_GE(most, s.faultPath) << "the buckets' upper bounds";
    std::printf("[ numbers  ] %s; batches %llu\n", numbers(s).c_str(), (unsigned long long)batches);
}

} // namespace
} // namespace npf::e2e
