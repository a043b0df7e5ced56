// npfd's liveness logic (daemon/stall_detector.h) on explicit times: a loop
// is stalled once its counter has not moved for longer than the limit, as
// far as the observations show; the rest of /healthz is tested end to end
// on a real npfd (npfd_health_test.cpp). No root.
#include <gtest/gtest.h>

#include "daemon/stall_detector.h"

namespace npf::daemon {
namespace {

constexpr uint64_t kS = 1'000'000'000;

TEST(StallDetector, ALoopIsStalledOnceItsCounterStaysPastTheLimit)
{
    StallDetector d(std::chrono::seconds(10));
    EXPECT_EQ(d.observe({{"control loop", 5}}, 100 * kS), "") << "first sight: new now";
    EXPECT_EQ(d.observe({{"control loop", 5}}, 110 * kS), "") << "exactly the limit is not past it";
    EXPECT_EQ(d.observe({{"control loop", 5}}, 110 * kS + 1), "control loop: no progress for 10.0 s");
    EXPECT_EQ(d.observe({{"control loop", 5}}, 125 * kS), "control loop: no progress for 25.0 s");
    EXPECT_EQ(d.observe({{"control loop", 6}}, 126 * kS), "") << "it moved: alive again";
    EXPECT_EQ(d.observe({{"control loop", 6}}, 135 * kS), "") << "the stall counts from when 6 was first seen";
}

TEST(StallDetector, NamesEveryStalledLoopAndForgetsTheGone)
{
    StallDetector d(std::chrono::milliseconds(500));
    const std::vector<LoopProgress> first = {{"control loop", 1}, {"eth0 npf-worker-0", 7}, {"eth0 npf-pager", 3}};
    EXPECT_EQ(d.observe(first, 0), "");
    EXPECT_EQ(d.observe({{"control loop", 2}, {"eth0 npf-worker-0", 7}, {"eth0 npf-pager", 3}}, kS),
              "eth0 npf-worker-0: no progress for 1.0 s; eth0 npf-pager: no progress for 1.0 s");
    // The pager's service went away; a loop of that name later is new.
    EXPECT_EQ(d.observe({{"control loop", 3}, {"eth0 npf-worker-0", 8}}, 2 * kS), "");
    EXPECT_EQ(d.observe({{"control loop", 4}, {"eth0 npf-worker-0", 9}, {"eth0 npf-pager", 3}}, 3 * kS), "");
}

TEST(StallDetector, ObservationsSparserThanTheLimitNeverOverstateAStall)
{
    // Probes every 10 s, limit 4 s: a loop that stopped between two probes
    // is reported at the next one with what the probes saw, never more.
    StallDetector d(std::chrono::seconds(4));
    EXPECT_EQ(d.observe({{"l", 1}}, 0), "");
    EXPECT_EQ(d.observe({{"l", 2}}, 10 * kS), ""); // stopped right after this
    EXPECT_EQ(d.observe({{"l", 2}}, 20 * kS), "l: no progress for 10.0 s");
}

} // namespace
} // namespace npf::daemon
