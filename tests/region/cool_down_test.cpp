// CoolDown on a clock of the test's own: which jobs count as slow, how much
// slow time is forgiven and earned back, how long each cool-down lasts
// (100 ms, doubling while the client stays slow or late, 3.2 s at most), and
// that a fast job ends the doubling.
#include <gtest/gtest.h>

#include "region/cool_down.h"

namespace npf::test {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kDeadline = 50 * kMs;

TEST(CoolDown, AJobIsSlowPastHalfItsDeadline)
{
    struct Case {
        const char* name;
        uint64_t took;
        bool slow;
    };
    const Case cases[] = {
        {"at once", 0, false},
        {"a fifth", kDeadline / 5, false},
        {"half", kDeadline / 2, false},
        {"just past half", kDeadline / 2 + 1, true},
        {"0.7", kDeadline * 7 / 10, true},
        {"all of it", kDeadline, true},
        // Ended in time, the pager woke a little after its deadline.
        {"a little more", kDeadline + kMs, true},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        CoolDown d(std::chrono::milliseconds(100), 0); // nothing forgiven
        const uint64_t now = 1000 * kMs;
        EXPECT_EQ(d.ended(c.took, kDeadline, now), c.slow);
        EXPECT_EQ(d.over(now), !c.slow);
    }
}

// What happens to one installer that is forgiven nothing, job after job,
// each posted as soon as the last cool-down is over (a probe), and how long
// the next one lasts.
TEST(CoolDown, DoublesWhileTheClientStaysSlowAndEndsWithAFastJob)
{
    enum class Job { Fast, Slow, Missed };
    struct Step {
        const char* name;
        Job job;
        uint64_t coolMs; // 0: none, the next job may be posted at once
    };
    const Step steps[] = {
        {"a fast job", Job::Fast, 0},
        {"the first slow one", Job::Slow, 100},
        {"its probe, slow too", Job::Slow, 200},
        {"a late one counts as slow", Job::Missed, 400},
        {"slow", Job::Slow, 800},
        {"slow", Job::Slow, 1600},
        {"slow", Job::Slow, 3200},
        {"slow, at the longest", Job::Slow, 3200},
        {"late, at the longest", Job::Missed, 3200},
        {"caught up: a fast probe", Job::Fast, 0},
        {"a fast job", Job::Fast, 0},
        {"slow again: from the start", Job::Slow, 100},
        {"a fast probe", Job::Fast, 0},
        {"one not started in time", Job::Missed, 100},
    };
    CoolDown d(std::chrono::milliseconds(100), 0);
    uint64_t now = 5 * kMs;
    for (const Step& s : steps) {
        SCOPED_TRACE(s.name);
        ASSERT_TRUE(d.over(now)) << "posted during a cool-down";
        switch (s.job) {
        case Job::Fast:
            EXPECT_FALSE(d.ended(kDeadline / 10, kDeadline, now));
            break;
        case Job::Slow:
            EXPECT_TRUE(d.ended(kDeadline * 7 / 10, kDeadline, now));
            break;
        case Job::Missed:
            d.missed(kDeadline, now);
            break;
        }
        const uint64_t cool = s.coolMs * kMs;
        if (cool) {
            EXPECT_FALSE(d.over(now + cool - 1)) << "over early";
        }
        EXPECT_TRUE(d.over(now + cool)) << "not over after " << s.coolMs << " ms";
        now += cool + kMs;
    }
}

// RegionConfig::clientCoolDown 0 (tests of late jobs): slow or late, the
// next job may be posted at once.
TEST(CoolDown, NoneWhenItsLengthIsZero)
{
    CoolDown d(std::chrono::milliseconds(0));
    const uint64_t now = 7 * kMs;
    EXPECT_TRUE(d.ended(kDeadline, kDeadline, now)) << "still slow, and counted";
    EXPECT_TRUE(d.over(now));
    d.missed(kDeadline, now);
    EXPECT_TRUE(d.over(now));
}

// By default four deadlines of slow time are forgiven at once (a slow job
// costs what it took, a late one its whole deadline), earned back at 2 % of
// the time that passes; none is forgiven to a probe, and a cool-down spends
// what was left.
TEST(CoolDown, ForgivesAFewSlowJobsAndEarnsThemBack)
{
    CoolDown d;
    const uint64_t slow = kDeadline * 7 / 10; // 35 ms of the 200 forgiven
    uint64_t now = 9 * kMs;
    for (int i = 0; i < 5; ++i, now += kMs) { // 175 ms of 200
        EXPECT_TRUE(d.ended(slow, kDeadline, now)) << "job " << i << " counted slow";
        EXPECT_TRUE(d.over(now)) << "job " << i << " not forgiven";
    }
    EXPECT_TRUE(d.ended(slow, kDeadline, now));
    EXPECT_FALSE(d.over(now)) << "a sixth one forgiven";
    EXPECT_TRUE(d.over(now + 100 * kMs));

    // A fast probe gets the client its jobs back, but 100 ms earned 2 ms:
    // the next slow one starts a cool-down, of 100 ms again.
    now += 100 * kMs;
    EXPECT_FALSE(d.ended(kDeadline / 10, kDeadline, now));
    now += kMs;
    EXPECT_TRUE(d.ended(slow, kDeadline, now));
    EXPECT_FALSE(d.over(now + 100 * kMs - 1));
    EXPECT_TRUE(d.over(now + 100 * kMs));

    // Ten seconds of fast jobs earn all of it back: 200 ms, four late jobs.
    now += 100 * kMs;
    EXPECT_FALSE(d.ended(kDeadline / 10, kDeadline, now));
    now += 10'000 * kMs;
    for (int i = 0; i < 4; ++i, now += kMs) {
        d.missed(kDeadline, now);
        EXPECT_TRUE(d.over(now)) << "late job " << i << " not forgiven";
    }
    d.missed(kDeadline, now);
    EXPECT_FALSE(d.over(now)) << "a fifth late job forgiven";
}

} // namespace
} // namespace npf::test
