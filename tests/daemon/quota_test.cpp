// npfd's Quotas: a rule's limits are totals over all its connections (no
// root, no npfd).
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "daemon/quota.h"

namespace npf::daemon {
namespace {

daemon::ClientRule rule(uint32_t connections, uint64_t region, uint64_t resident, uint32_t flows)
{
    daemon::ClientRule r;
    r.uid = 1000;
    r.connections = connections;
    r.regionBytes = region;
    r.residentBytes = resident;
    r.flows = flows;
    return r;
}

TEST(Quotas, ARulesLimitsAreTotalsOverItsConnections)
{
    Quotas q;
    const daemon::ClientRule r = rule(3, 64 << 20, 16 << 20, 4);
    std::string why;
    std::optional<Quotas::Lease> a = q.admit(&r, &why), b = q.admit(&r, &why), c = q.admit(&r, &why);
    ASSERT_TRUE(a && b && c);
    EXPECT_FALSE(q.admit(&r, &why)) << "a fourth connection";
    EXPECT_NE(why.find("allows 3 connections"), std::string::npos) << why;

    EXPECT_TRUE(a->takeRegion(48 << 20, 8 << 20, &why));
    EXPECT_FALSE(b->takeRegion(32 << 20, 4 << 20, &why)) << "48 + 32 MiB of region";
    EXPECT_NE(why.find("they hold 50331648 bytes"), std::string::npos) << why;
    EXPECT_FALSE(b->takeRegion(16 << 20, 12 << 20, &why)) << "8 + 12 MiB of budget";
    EXPECT_TRUE(b->takeRegion(16 << 20, 8 << 20, &why));
    EXPECT_EQ(q.use(&r).regionBytes, 64u << 20);

    for (int i = 0; i < 4; ++i)
        EXPECT_TRUE((i % 2 ? a : c)->takeFlow(&why)) << i;
    EXPECT_FALSE(b->takeFlow(&why)) << "a fifth flow";
    c->giveFlow();
    EXPECT_TRUE(b->takeFlow(&why));

    // A connection that goes gives back all it held.
    a.reset();
    const Quotas::Use u = q.use(&r);
    EXPECT_EQ(u.connections, 2u);
    EXPECT_EQ(u.regionBytes, 16u << 20);
    EXPECT_EQ(u.residentBytes, 8u << 20);
    EXPECT_EQ(u.flows, 2u);
    EXPECT_TRUE(q.admit(&r, &why));
    b.reset();
    c.reset();
    EXPECT_EQ(q.use(&r).connections, 0u);
}

// A client that asks no budget gets the rule's fair share, so every
// connection the rule allows gets in with default options.
TEST(Quotas, EveryConnectionARuleAllowsCanTakeTheDefaultBudget)
{
    Quotas q;
    const daemon::ClientRule r = rule(4, 1 << 30, 64 << 20, 8);
    std::string why;
    std::vector<Quotas::Lease> leases;
    for (int i = 0; i < 4; ++i) {
        std::optional<Quotas::Lease> l = q.admit(&r, &why);
        ASSERT_TRUE(l) << i << ": " << why;
        EXPECT_EQ(l->defaultBudget(), 16u << 20) << i;
        EXPECT_EQ(l->free().residentBytes, (64u - 16u * i) << 20) << i;
        EXPECT_TRUE(l->takeRegion(64 << 20, l->defaultBudget(), &why)) << i << ": " << why;
        leases.push_back(std::move(*l));
    }
    EXPECT_EQ(q.use(&r).residentBytes, 64u << 20);

    // One that asked for more leaves the next less than its share: the
    // default is what is free then, and a connection with nothing free is
    // refused its region, saying what the others hold.
    leases.clear();
    std::optional<Quotas::Lease> big = q.admit(&r, &why), next = q.admit(&r, &why);
    ASSERT_TRUE(big && next);
    ASSERT_TRUE(big->takeRegion(64 << 20, 56 << 20, &why)) << why;
    EXPECT_EQ(next->defaultBudget(), 8u << 20);
    EXPECT_EQ(next->free().regionBytes, (1u << 30) - (64u << 20));
    EXPECT_EQ(next->free().flows, 8u);
    ASSERT_TRUE(next->takeRegion(64 << 20, 8 << 20, &why)) << why;
    std::optional<Quotas::Lease> third = q.admit(&r, &why);
    ASSERT_TRUE(third);
    EXPECT_EQ(third->defaultBudget(), 0u);
    EXPECT_FALSE(third->takeRegion(64 << 20, 4096, &why));
    EXPECT_NE(why.find("they hold 67108864 bytes"), std::string::npos) << why;
}

// Root's rule sets no limits: its default is all there is, not a share of it.
TEST(Quotas, RootsDefaultBudgetIsNotAShare)
{
    Quotas q;
    std::string why;
    std::optional<Quotas::Lease> l = q.admit(&rootRule(), &why);
    ASSERT_TRUE(l) << why;
    EXPECT_EQ(l->defaultBudget(), std::numeric_limits<uint64_t>::max());
}

TEST(Quotas, APodRulesLimitsAreEachPodsOwn)
{
    Quotas q;
    const daemon::ClientRule r = rule(2, 64 << 20, 16 << 20, 1);
    std::string why;
    std::optional<Quotas::Lease> a1 = q.admit(&r, &why, "pod-a"), a2 = q.admit(&r, &why, "pod-a");
    ASSERT_TRUE(a1 && a2);
    EXPECT_FALSE(q.admit(&r, &why, "pod-a")) << "a third connection of pod a";
    EXPECT_NE(why.find("allows 2 connections at once per pod"), std::string::npos) << why;
    std::optional<Quotas::Lease> b = q.admit(&r, &why, "pod-b");
    ASSERT_TRUE(b) << "pod b has its own connections";
    EXPECT_TRUE(a1->takeFlow(&why));
    EXPECT_FALSE(a2->takeFlow(&why));
    EXPECT_NE(why.find("to all the pod's connections"), std::string::npos) << why;
    EXPECT_TRUE(b->takeFlow(&why)) << "pod b has its own flows";
    EXPECT_TRUE(a1->takeRegion(64 << 20, 16 << 20, &why));
    EXPECT_TRUE(b->takeRegion(64 << 20, 16 << 20, &why));
    EXPECT_EQ(q.use(&r, "pod-a").flows, 1u);
    EXPECT_EQ(q.use(&r).connections, 0u) << "the rule's own totals are untouched";
    a1.reset();
    a2.reset();
    EXPECT_EQ(q.use(&r, "pod-a").connections, 0u);
    EXPECT_TRUE(q.admit(&r, &why, "pod-a"));
}

TEST(Quotas, RulesDoNotShareAndClientsNoRuleAdmitsGetAFewConnections)
{
    Quotas q;
    const daemon::ClientRule r1 = rule(1, 1 << 20, 1 << 20, 1), r2 = rule(1, 1 << 20, 1 << 20, 1);
    std::string why;
    auto a = q.admit(&r1, &why);
    auto b = q.admit(&r2, &why);
    ASSERT_TRUE(a && b);
    EXPECT_TRUE(a->takeRegion(1 << 20, 1 << 20, &why));
    EXPECT_TRUE(b->takeRegion(1 << 20, 1 << 20, &why));
    std::vector<Quotas::Lease> none;
    for (uint32_t i = 0; i < Quotas::kUnadmittedConnections; ++i) {
        auto l = q.admit(nullptr, &why);
        ASSERT_TRUE(l);
        EXPECT_EQ(l->rule(), nullptr);
        none.push_back(std::move(*l));
    }
    EXPECT_FALSE(q.admit(nullptr, &why));
    EXPECT_NE(why.find("no client rule"), std::string::npos) << why;
    none.pop_back();
    EXPECT_TRUE(q.admit(nullptr, &why));
}

// A rule's connections, all its pods together, are at most its share of
// max_connections (Quotas' tenantShare), whatever it allows per pod; root's
// rule is the operator's and has no share.
TEST(Quotas, NoTenantHoldsMoreThanItsShareOfConnections)
{
    Quotas q(5);
    const daemon::ClientRule pods = rule(2, 1 << 20, 1 << 20, 1), other = rule(16, 1 << 20, 1 << 20, 1);
    std::string why;
    std::vector<Quotas::Lease> held;
    for (const char* pod : {"pod-a", "pod-a", "pod-b", "pod-b", "pod-c"}) {
        auto l = q.admit(&pods, &why, pod);
        ASSERT_TRUE(l) << pod << ": " << why;
        held.push_back(std::move(*l));
    }
    EXPECT_FALSE(q.admit(&pods, &why, "pod-c")) << "a sixth connection of the rule, its pod's second";
    EXPECT_NE(why.find("their share of npfd's max_connections"), std::string::npos) << why;
    EXPECT_NE(why.find("all its pods together"), std::string::npos) << why;
    EXPECT_FALSE(q.admit(&pods, &why, "pod-d")) << "a new pod of the same rule";
    for (int i = 0; i < 5; ++i) {
        auto l = q.admit(&other, &why);
        ASSERT_TRUE(l) << "another rule has its own share: " << why;
        held.push_back(std::move(*l));
    }
    EXPECT_FALSE(q.admit(&other, &why)) << "16 allowed, 5 its share";
    held.erase(held.begin()); // one of pod-a's
    EXPECT_TRUE(q.admit(&pods, &why, "pod-d")) << why;
    std::vector<Quotas::Lease> root;
    for (int i = 0; i < 8; ++i) {
        auto l = q.admit(&rootRule(), &why);
        ASSERT_TRUE(l) << "root has no share: " << why;
        root.push_back(std::move(*l));
    }
}

} // namespace
} // namespace npf::daemon
