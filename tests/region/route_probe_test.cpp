// The 4 KiB route probe (region/route_probe.h) measures both cycles for
// real: each a positive cost per page, the pool's only where the kernel can
// move pages, and one answer for the life of the process.
#include <gtest/gtest.h>

#include "region/route_probe.h"
#include "region/uffd.h"

namespace npf::test {
namespace {

TEST(RouteProbe, MeasuresBothCyclesOfTheHost)
{
    const RouteProbe p = probeRoutes4k();
    ASSERT_EQ(p.error, "");
    EXPECT_GT(p.copyNs, 0.0);
    if (userfaultfdHasMove())
        EXPECT_GT(p.poolNs, 0.0);
    else
        EXPECT_EQ(p.poolNs, 0.0);
    EXPECT_EQ(p.poolFaster(), p.poolNs > 0 && p.poolNs < p.copyNs);
    std::printf("[ numbers  ] 4 KiB cycle: copy in + free %.0f ns/page, page pool %.0f ns/page\n", p.copyNs, p.poolNs);
}

TEST(RouteProbe, AnswersOncePerProcess)
{
    const RouteProbe& a = routes4k();
    const RouteProbe& b = routes4k();
    EXPECT_EQ(&a, &b);
    EXPECT_EQ(a.copyNs, b.copyNs);
}

TEST(RouteProbe, AFailedProbeChoosesTheCopy)
{
    RouteProbe p;
    p.copyNs = 2000;
    p.poolNs = 1000;
    EXPECT_TRUE(p.poolFaster());
    p.error = "no userfaultfd";
    EXPECT_FALSE(p.poolFaster());
    p.error.clear();
    p.poolNs = 0; // no UFFDIO_MOVE
    EXPECT_FALSE(p.poolFaster());
}

} // namespace
} // namespace npf::test
