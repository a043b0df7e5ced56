#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "region/epoch.h"

namespace npf {
namespace {

TEST(EpochDomain, IdleReadersNeverHoldBack)
{
    EpochDomain d;
    EpochDomain::Reader r(d);
    EXPECT_TRUE(d.passed(d.advance()));
}

TEST(EpochDomain, ActiveReaderHoldsBackUntilExitOrQuiesce)
{
    EpochDomain d;
    EpochDomain::Reader r1(d), r2(d);
    r1.enter();
    r2.enter();
    uint64_t e = d.advance();
    EXPECT_FALSE(d.passed(e));
    r1.exit();
    EXPECT_FALSE(d.passed(e));
    r2.quiesce(); // still active, but entered after the advance
    EXPECT_TRUE(d.passed(e));
    uint64_t e2 = d.advance();
    EXPECT_FALSE(d.passed(e2));
    r2.exit();
    EXPECT_TRUE(d.passed(e2));
}

TEST(EpochDomain, SlotsAreReusedAndBounded)
{
    EpochDomain d;
    std::vector<unsigned> slots;
    for (unsigned i = 0; i < EpochDomain::kMaxReaders; ++i)
        slots.push_back(d.registerReader());
    EXPECT_THROW(d.registerReader(), std::system_error);
    d.unregisterReader(slots[5]);
    EXPECT_EQ(d.registerReader(), slots[5]);
}

// The Dekker pairing: a reader that saw the flag set after entering is
// always waited for by a writer that cleared it and advanced.
TEST(EpochDomain, ClearedFlagIsSeenOrReaderIsWaitedFor)
{
    EpochDomain d;
    std::atomic<uint64_t> flag{1};
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> violations{0}, uses{0};
    std::atomic<int> inUse{0};
    std::thread reader([&] {
        EpochDomain::Reader r(d);
        while (!stop.load(std::memory_order_relaxed)) {
            r.enter();
            if (flag.load(std::memory_order_relaxed)) {
                inUse.store(1, std::memory_order_relaxed);
                uses.fetch_add(1, std::memory_order_relaxed);
                inUse.store(0, std::memory_order_relaxed);
            }
            r.exit();
        }
    });
    for (int i = 0; i < 20000; ++i) {
        flag.store(0, std::memory_order_relaxed);
        uint64_t e = d.advance();
        while (!d.passed(e))
            std::this_thread::yield();
        if (inUse.load(std::memory_order_relaxed))
            violations.fetch_add(1);
        flag.store(1, std::memory_order_release);
        // let the reader use the flag before the next clear
        for (uint64_t u = uses.load(); uses.load() == u && i % 64 == 0;)
            std::this_thread::yield();
    }
    stop = true;
    reader.join();
    EXPECT_EQ(violations.load(), 0u);
    EXPECT_GT(uses.load(), 0u);
}

} // namespace
} // namespace npf
