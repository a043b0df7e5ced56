#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "npf/abi.h"
#include "region/patch_plan.h"

namespace npf {
namespace {

constexpr uint64_t P = NPF_PAGE_SIZE;

struct PlanCase {
    const char* name;
    std::vector<std::pair<uint64_t, uint32_t>> patches; // offset, len
    std::vector<std::pair<uint64_t, uint32_t>> pieces;  // page, len (in order)
    std::vector<int> results;
};

class PatchPlanCases : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PatchPlanCases, SplitsAndGroupsByPage)
{
    const PlanCase& c = GetParam();
    static uint8_t src[3 * 9216];
    std::vector<Patch> ps;
    for (auto [off, len] : c.patches)
        ps.push_back({off, src, len});
    std::vector<int> res(ps.size(), 99);
    PatchPlan plan;
    ASSERT_EQ(plan.build(ps, 16 * P, NPF_PAGE_SHIFT, res), static_cast<int>(c.pieces.size()));
    ASSERT_EQ(plan.pieces().size(), c.pieces.size());
    for (size_t i = 0; i < c.pieces.size(); ++i) {
        EXPECT_EQ(plan.pieces()[i].page, c.pieces[i].first) << "piece " << i;
        EXPECT_EQ(plan.pieces()[i].len, c.pieces[i].second) << "piece " << i;
    }
    EXPECT_EQ(res, c.results);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, PatchPlanCases,
    ::testing::Values(
        PlanCase{"inside_one_page", {{100, 200}}, {{0, 200}}, {0}},
        PlanCase{"exact_page", {{P, P}}, {{1, P}}, {0}},
        PlanCase{"straddles_boundary", {{P - 1, 2}}, {{0, 1}, {1, 1}}, {0}},
        PlanCase{"spans_three_pages", {{2 * P - 100, P + 200}}, {{1, 100}, {2, P}, {3, 100}}, {0}},
        PlanCase{"jumbo_spans_four", {{3 * P - 1, 9216}}, {{2, 1}, {3, P}, {4, P}, {5, 9216 - 1 - 2 * P}}, {0}},
        PlanCase{"out_of_order_grouped", {{5 * P, 10}, {P, 10}, {5 * P + 20, 10}}, {{1, 10}, {5, 10}, {5, 10}}, {0, 0, 0}},
        PlanCase{"out_of_bounds_rejected", {{16 * P - 4, 8}, {16 * P, 1}, {0, 4}}, {{0, 4}}, {-EINVAL, -EINVAL, 0}},
        PlanCase{"ends_at_region_end", {{16 * P - 4, 4}}, {{15, 4}}, {0}},
        PlanCase{"zero_length", {{7 * P, 0}}, {}, {0}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PatchPlan, LaterPatchWinsWhereTheyOverlap)
{
    uint8_t a[64], b[64];
    std::memset(a, 0xaa, sizeof a);
    std::memset(b, 0xbb, sizeof b);
    // b arrives second but sorts first by offset: arrival order must decide.
    Patch ps[] = {{P + 32, a, 64}, {P + 0, b, 64}, {P + 48, a, 8}};
    int res[3];
    PatchPlan plan;
    ASSERT_EQ(plan.build(ps, 4 * P, NPF_PAGE_SHIFT, res), 3);
    std::vector<uint8_t> page(P, 0);
    plan.applyTo(page.data(), 0, plan.pageEnd(0));
    EXPECT_EQ(plan.pageEnd(0), 3u);
    // [0, 64) from b (arrived after a) except the third patch, [64, 96) what is left of a
    for (int i = 0; i < 64; ++i)
        EXPECT_EQ(page[i], i >= 48 && i < 56 ? 0xaa : 0xbb) << i;
    for (int i = 64; i < 96; ++i)
        EXPECT_EQ(page[i], 0xaa) << i;
    EXPECT_EQ(page[96], 0);
}

} // namespace
} // namespace npf
