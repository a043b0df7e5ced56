// The Evictor on its own, over a real userfaultfd-registered memfd with a
// fake host: which victims are saved, fenced or dropped, that the decision
// comes after the grace period, and that victims whose fence or save failed
// stay resident.
#include "region/evictor.h"

#include <functional>
#include <utility>
#include <vector>

#include "page_target.h"
#include "region/copy_installer.h"

namespace npf::test {
namespace {

using FenceRun = std::pair<uint64_t, uint64_t>; // first page, pages

struct FakeHost : Evictor::Host {
    bool waitGrace() noexcept override
    {
        ++graces;
        if (duringGrace)
            duringGrace();
        return !graceTimesOut;
    }
    int raiseFence(uint64_t page, uint64_t n) noexcept override
    {
        raised.emplace_back(page, n);
        return raiseError;
    }
    void liftFence(uint64_t page, uint64_t n) noexcept override { lifted.emplace_back(page, n); }

    int graces = 0;
    int raiseError = 0;
    bool graceTimesOut = false;
    std::function<void()> duringGrace;
    std::vector<FenceRun> raised, lifted;
};

// Pages [0, pages) installed with random content, evicted in batches of batchPages.
struct EvictTarget : PageTarget {
    EvictTarget(uint64_t pages, uint32_t batchPages) : PageTarget(64, NPF_PAGE_SHIFT, batchPages)
    {
        content = randomBytes(pages * kPg, 1);
        Patch p{0, content.data(), static_cast<uint32_t>(content.size())};
        plan({&p, 1});
        copier.install(withPieces(), nullptr);
        EXPECT_EQ(state.residentPages(), pages);
    }
    // Saved content of `page` equals what was installed.
    bool savedIntact(uint64_t page)
    {
        std::vector<uint8_t> back(kPg);
        return spill.load(page * kPg, back.data(), kPg) == 0 &&
               std::memcmp(back.data(), &content[page * kPg], kPg) == 0;
    }

    const RegionParts parts{uffd, io, state, spill, planned, c, name};
    CopyInstaller copier{parts, staging, noPool, noReserve, batch};
    FakeHost host;
    Evictor evictor{parts, host, batch};
    std::vector<uint8_t> content;
};

TEST(Evictor, SavesAndFencesKeptPagesDropsReleasedOnes)
{
    NPF_REQUIRE_UFFD();
    EvictTarget t(6, 4);
    EXPECT_EQ(t.state.release(2 * kPg, 2 * kPg, [](uint64_t) {}), 2);
    EXPECT_EQ(t.evictor.evictTo(0, true), 6);
    EXPECT_EQ(t.host.graces, 2) << "batches of 4: 0-3, 4-5";
    EXPECT_EQ(t.host.raised, (std::vector<FenceRun>{{0, 2}, {4, 2}})) << "released pages skip the fence";
    EXPECT_EQ(t.host.lifted, t.host.raised);
    EXPECT_EQ(t.c.get<&RegionStats::evicted>(), 6u);
    EXPECT_EQ(t.c.get<&RegionStats::spilled>(), 4u);
    EXPECT_EQ(t.c.get<&RegionStats::discarded>(), 2u);
    EXPECT_EQ(t.c.get<&RegionStats::errors>(), 0u);
    EXPECT_EQ(t.state.residentPages(), 0u);
    EXPECT_FALSE(t.state.isResident(0, 1));
    EXPECT_EQ(t.memfdBytes(), 0u) << "every victim punched";
    for (uint64_t p : {0, 1, 4, 5}) {
        EXPECT_TRUE(t.state.saved(p)) << p;
        EXPECT_TRUE(t.savedIntact(p)) << p;
    }
    EXPECT_FALSE(t.state.saved(2));
    EXPECT_FALSE(t.state.saved(3));
}

// A released page written while eviction waits for the grace period (a
// fast-path writer inside its epoch section) is saved: the decision is taken
// after the grace period.
TEST(Evictor, ReleaseEndedDuringTheGracePeriodIsSaved)
{
    NPF_REQUIRE_UFFD();
    EvictTarget t(2, 64);
    EXPECT_EQ(t.state.release(0, 2 * kPg, [](uint64_t) {}), 2);
    t.host.duringGrace = [&] { t.state.markReferenced(kPg + 100, 10); };
    EXPECT_EQ(t.evictor.evictTo(0, true), 2);
    EXPECT_EQ(t.c.get<&RegionStats::discarded>(), 1u);
    EXPECT_EQ(t.c.get<&RegionStats::spilled>(), 1u);
    EXPECT_TRUE(t.state.saved(1));
    EXPECT_EQ(t.host.raised, (std::vector<FenceRun>{{1, 1}}));
}

TEST(Evictor, VictimsWhoseFenceFailsStayResident)
{
    NPF_REQUIRE_UFFD();
    EvictTarget t(4, 64);
    t.host.raiseError = -EAGAIN;
    EXPECT_EQ(t.evictor.evictTo(0, true), -EIO) << "nothing evicted";
    EXPECT_EQ(t.c.get<&RegionStats::errors>(), 1u) << "one run";
    EXPECT_EQ(t.c.get<&RegionStats::evicted>(), 0u);
    EXPECT_EQ(t.c.get<&RegionStats::spilled>(), 0u) << "no save behind a fence that is not up";
    EXPECT_EQ(t.spillBytes(), 0u);
    EXPECT_EQ(t.state.residentPages(), 4u);
    EXPECT_TRUE(t.state.isResident(0, 4 * kPg)) << "resident bits set again";
    EXPECT_EQ(t.state.clockLength(), 4u) << "back on the clock";
    EXPECT_EQ(std::memcmp(t.at(0), t.content.data(), t.content.size()), 0) << "not punched";
    EXPECT_EQ(t.host.lifted, t.host.raised) << "lifted where it was tried";

    t.host.raiseError = 0;
    EXPECT_EQ(t.evictor.evictTo(0, true), 4) << "the next eviction takes them";
    EXPECT_EQ(t.state.residentPages(), 0u);
}

// A grace period given up (a writer held its epoch past the bound): no
// victim goes, each stays as it was, and the next call evicts them.
TEST(Evictor, GraceTimeoutKeepsEveryVictimResident)
{
    NPF_REQUIRE_UFFD();
    EvictTarget t(4, 64);
    t.host.graceTimesOut = true;
    EXPECT_EQ(t.evictor.evictTo(0, true), -ETIMEDOUT);
    EXPECT_EQ(t.c.get<&RegionStats::graceTimeouts>(), 1u);
    EXPECT_EQ(t.c.get<&RegionStats::evicted>(), 0u);
    EXPECT_EQ(t.c.get<&RegionStats::spilled>(), 0u);
    EXPECT_TRUE(t.host.raised.empty()) << "no fence, no save, no punch";
    EXPECT_EQ(t.state.residentPages(), 4u);
    EXPECT_TRUE(t.state.isResident(0, 4 * kPg)) << "resident bits set again";
    EXPECT_EQ(t.state.clockLength(), 4u) << "back on the clock";
    EXPECT_EQ(std::memcmp(t.at(0), t.content.data(), t.content.size()), 0) << "not punched";

    t.host.graceTimesOut = false;
    EXPECT_EQ(t.evictor.evictTo(0, true), 4);
    EXPECT_EQ(t.memfdBytes(), 0u);
}

TEST(Evictor, ProtectedPagesBlockEviction)
{
    NPF_REQUIRE_UFFD();
    EvictTarget t(3, 64);
    t.state.protect(0, 3 * kPg);
    EXPECT_EQ(t.evictor.evictTo(0, true), 0);
    EXPECT_EQ(t.c.get<&RegionStats::evictBlocked>(), 1u);
    EXPECT_EQ(t.host.graces, 0) << "no victim, no grace period";
    t.state.unprotect(kPg, 1);
    EXPECT_EQ(t.evictor.evictTo(1, false), 1) << "down to the target";
    EXPECT_FALSE(t.state.present(1));
}

} // namespace
} // namespace npf::test
