// The workers' hand-off to the pager: bounded, allocated up front, two
// buffers (workers fill one while the pager places the other). No root.
#include "engine/deferred.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace npf::test {
namespace {

Deferred item(uint64_t seq, uint32_t len) { return {nullptr, seq, seq * 4096, 0, NPF_CS_OK, len, nullptr}; }

TEST(DeferredQueue, TakesWhatWasPushedWithItsBytes)
{
    DeferredQueue q(4, 64);
    for (uint64_t s = 0; s < 3; s++)
        ASSERT_EQ(q.push(item(s, 10), [&](uint8_t* dst) noexcept {
            std::memset(dst, int('a' + s), 10);
            return true;
        }), 1);
    auto got = q.take();
    ASSERT_EQ(got.size(), 3u);
    for (uint64_t s = 0; s < 3; s++) {
        EXPECT_EQ(got[s].seq, s);
        EXPECT_EQ(got[s].offset, s * 4096);
        ASSERT_EQ(got[s].len, 10u);
        for (uint32_t i = 0; i < 10; i++)
            EXPECT_EQ(got[s].bytes[i], uint8_t('a' + s));
    }
    EXPECT_TRUE(q.take().empty());
}

TEST(DeferredQueue, FullAndTooLongAreRefusedNotGrown)
{
    DeferredQueue q(2, 64);
    auto fill = [](uint8_t*) noexcept { return true; };
    EXPECT_EQ(q.push(item(0, 64), fill), 1);
    EXPECT_EQ(q.push(item(1, 1), fill), 1);
    EXPECT_EQ(q.push(item(2, 1), fill), -ENOSPC) << "capacity 2";
    EXPECT_EQ(q.push(item(3, 65), fill), -ENOSPC) << "longer than maxLen";
    EXPECT_EQ(q.take().size(), 2u);
    EXPECT_EQ(q.push(item(4, 1), fill), 1) << "room again after take()";
}

TEST(DeferredQueue, RefusedByTheCopyIsNotQueued)
{
    DeferredQueue q(2, 64);
    EXPECT_EQ(q.push(item(0, 8), [](uint8_t*) noexcept { return false; }), 0);
    EXPECT_TRUE(q.take().empty());
}

// What the pager reads stays intact while workers fill the other buffer.
TEST(DeferredQueue, TakenBatchSurvivesConcurrentPushes)
{
    static constexpr uint32_t kCap = 64, kLen = 32;
    DeferredQueue q(kCap, kLen);
    for (uint64_t s = 0; s < kCap; s++)
        ASSERT_EQ(q.push(item(s, kLen), [&](uint8_t* d) noexcept {
            std::memset(d, int(s), kLen);
            return true;
        }), 1);
    auto batch = q.take();
    std::thread worker([&] {
        for (uint64_t s = 0; s < kCap; s++)
            (void)q.push(item(1000 + s, kLen), [](uint8_t* d) noexcept {
                std::memset(d, 0xee, kLen);
                return true;
            });
    });
    worker.join();
    ASSERT_EQ(batch.size(), kCap);
    for (uint64_t s = 0; s < kCap; s++)
        for (uint32_t i = 0; i < kLen; i++)
            ASSERT_EQ(batch[s].bytes[i], uint8_t(s)) << s;
    EXPECT_EQ(q.take().size(), kCap);
}

} // namespace
} // namespace npf::test
