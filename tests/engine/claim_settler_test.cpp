// ClaimSettler, the proof that a claimed seq was dropped, as a state machine
// without threads or a kernel: a scripted SettleSource says when flows have
// unsettled claims, when the grace period is over and when the rings have
// released past their marks; settle() may come only after all three, in
// that order, and never twice for one sample.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/claim_settler.h"

namespace npf {
namespace {

struct Script final : SettleSource {
    bool pending = false, grantGrace = true, over = false, released = false;
    uint64_t nextTicket = 1, askedTicket = 0;
    std::vector<std::string> calls;

    bool sample() noexcept override
    {
        calls.push_back("sample");
        return pending;
    }
    bool requestGrace(uint64_t* ticket) noexcept override
    {
        calls.push_back("grace");
        if (!grantGrace)
            return false;
        *ticket = askedTicket = nextTicket++;
        return true;
    }
    bool graceOver(uint64_t ticket) const noexcept override { return over && ticket == askedTicket; }
    void markRings() noexcept override { calls.push_back("mark"); }
    bool ringsReleased() const noexcept override { return released; }
    void settle() noexcept override { calls.push_back("settle"); }
};

using State = ClaimSettler::State;

TEST(ClaimSettler, NothingPendingStaysIdle)
{
    ClaimSettler s;
    Script src;
    for (int i = 0; i < 3; i++)
        s.step(src);
    EXPECT_EQ(s.state(), State::Idle);
    EXPECT_EQ(src.calls, (std::vector<std::string>{"sample", "sample", "sample"}));
}

TEST(ClaimSettler, SettlesOnlyAfterGraceThenRings)
{
    ClaimSettler s;
    Script src;
    src.pending = true;
    s.step(src);
    EXPECT_EQ(s.state(), State::Barrier);
    s.step(src); // grace period not over: no mark, no settle
    s.step(src);
    EXPECT_EQ(s.state(), State::Barrier);
    src.over = true;
    s.step(src); // marks the rings at once, they have not released yet
    EXPECT_EQ(s.state(), State::Drain);
    s.step(src);
    EXPECT_EQ(s.state(), State::Drain);
    src.released = true;
    s.step(src);
    EXPECT_EQ(s.state(), State::Idle);
    EXPECT_EQ(src.calls, (std::vector<std::string>{"sample", "grace", "mark", "settle"}));
}

// With the rings released already, a sample settles in the round its grace
// period ends; the next sample waits for a grace period of its own.
TEST(ClaimSettler, EachSampleWaitsForAGracePeriodOfItsOwn)
{
    ClaimSettler s;
    Script src;
    src.pending = src.over = src.released = true;
    s.step(src);
    s.step(src);
    EXPECT_EQ(s.state(), State::Idle);
    EXPECT_EQ(src.calls, (std::vector<std::string>{"sample", "grace", "mark", "settle"}));
    src.over = false; // the next sample's grace period is not over
    s.step(src);
    s.step(src);
    EXPECT_EQ(s.state(), State::Barrier);
    EXPECT_EQ(src.calls, (std::vector<std::string>{"sample", "grace", "mark", "settle", "sample", "grace"}));
}

TEST(ClaimSettler, NoGracePeriodNoProgress)
{
    ClaimSettler s;
    Script src;
    src.pending = true;
    src.grantGrace = false;
    s.step(src);
    EXPECT_EQ(s.state(), State::Idle);
    src.grantGrace = true;
    s.step(src);
    EXPECT_EQ(s.state(), State::Barrier);
}

} // namespace
} // namespace npf
