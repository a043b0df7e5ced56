// `npfctl flow list` shows each flow's own XDP outcomes (npf_flow_stats, of
// the flow's current generation): run for real against npf_xdp on a veth,
// with datagrams from the peer namespace.
#include <bpf/bpf.h>

#include <array>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/dataplane.h"
#include "dataplane/flows.h"
#include "engine_fixture.h"

namespace npf::e2e {
namespace {

uint32_t size200(uint32_t) { return 200; }

// `npfctl flow list IF --json`: the flow on `port` (null if none).
nlohmann::json flowOnPort(Rig& rig, uint16_t port)
{
    int rc = -1;
    const std::string out = rig.npfctl("flow list " + rig.rxIf() + " --json", &rc);
    EXPECT_EQ(rc, 0) << out;
    const nlohmann::json list = nlohmann::json::parse(out);
    for (const auto& f : list["flows"])
        if (f["port"] == port)
            return f;
    ADD_FAILURE() << "flow list has no flow on port " << port << ": " << out;
    return nullptr;
}

// The words of the text row of the flow on `port` ("" words if none).
std::vector<std::string> rowOfPort(Rig& rig, uint16_t port)
{
    int rc = -1;
    std::istringstream in(rig.npfctl("flow list " + rig.rxIf(), &rc));
    EXPECT_EQ(rc, 0);
    for (std::string line; std::getline(in, line);) {
        std::istringstream l(line);
        std::vector<std::string> w;
        for (std::string x; l >> x;)
            w.push_back(x);
        if (w.size() > 1 && w[1] == std::to_string(port))
            return w;
    }
    return {};
}

// Until XDP has seen `n` more packets than `from` (the rig's namespaces send
// nothing of their own).
bool xdpSaw(Rig& rig, uint64_t from, uint64_t n)
{
    return test::waitUntil([&] { return rig.xdpStat(NPF_STAT_RX_TOTAL) >= from + n; });
}

// A served flow whose one posted buffer is used up: the next datagrams find
// no buffer (drop_rnr), and `flow list` shows them as that flow's, nothing
// as the other flow's.
TEST_F(EngineE2E, FlowListShowsEachFlowsDropsWithoutBuffers)
{
    constexpr uint16_t kPort = 7800, kQuiet = 7801;
    constexpr uint32_t kDrops = 4;
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& flow = eng->openFlow(kPort);
    eng->openFlow(kQuiet);
    ASSERT_TRUE(flow.post(0, 2048));
    flow.flush();
    uint64_t rx = rig.xdpStat(NPF_STAT_RX_TOTAL);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = 1, .dstPort = kPort, .size = size200}), "");
    std::array<npf_completion, 4> done{};
    size_t completed = 0;
    ASSERT_TRUE(test::waitUntil([&] { return (completed += static_cast<size_t>(std::max(flow.poll(done), 0))) >= 1; }))
        << describe(rig.xdp());
    ASSERT_TRUE(xdpSaw(rig, rx, 1));

    // No buffer posted now.
    rx = rig.xdpStat(NPF_STAT_RX_TOTAL);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = kDrops, .dstPort = kPort, .size = size200}), "");
    ASSERT_TRUE(xdpSaw(rig, rx, kDrops)) << describe(rig.xdp());

    const nlohmann::json f = flowOnPort(rig, kPort);
    ASSERT_FALSE(f.is_null());
    EXPECT_EQ(f["xdp"]["drop_rnr"], kDrops) << f.dump();
    EXPECT_EQ(f["xdp"]["redir_primary"].get<uint64_t>() + f["xdp"]["redir_backup"].get<uint64_t>(), 1u) << f.dump();
    EXPECT_EQ(f["reached"], kDrops + 1) << f.dump();
    EXPECT_EQ(f["claimed"], 1) << f.dump();
    EXPECT_EQ(f["dropped"], kDrops) << f.dump();
    EXPECT_EQ(f["passed"], 0) << f.dump();
    EXPECT_EQ(f["posted"], 1);
    EXPECT_EQ(f["consumed"], 1);
    // The engine's own view of the flow reads the same entry.
    const FlowStats s = flow.stats();
    EXPECT_EQ(s.xdpCount(NPF_STAT_DROP_RNR), kDrops);
    EXPECT_EQ(s.reached(), kDrops + 1);

    const nlohmann::json quiet = flowOnPort(rig, kQuiet);
    ASSERT_FALSE(quiet.is_null());
    EXPECT_EQ(quiet["reached"], 0) << quiet.dump();
    for (const auto& [name, n] : quiet["xdp"].items())
        EXPECT_EQ(n, 0) << name;

    // The text table: REACHED CLAIMED DROPPED PASSED after the cursors, then
    // CREDITS HELD: "-", the flow grants no credits.
    EXPECT_EQ(rowOfPort(rig, kPort),
              (std::vector<std::string>{f["id"].dump(), std::to_string(kPort), "*", "1", "1",
                                        std::to_string(kDrops + 1), "1", std::to_string(kDrops), "0", "-", "-"}));
}

// An id handed to a new flow starts from zero, and a datagram XDP matched to
// the id's earlier flow counts for no flow. No engine: every datagram of a
// flow passes to the kernel (pass_no_socket), counted for the flow.
TEST_F(EngineE2E, FlowListStartsAReusedIdFromZero)
{
    constexpr uint16_t kOld = 7810, kNew = 7811;
    Rig rig;
    ASSERT_TRUE(rig.npfctlOk("attach " + rig.rxIf()));
    ASSERT_TRUE(rig.npfctlOk("flow add " + rig.rxIf() + " " + std::to_string(kOld)));
    uint64_t rx = rig.xdpStat(NPF_STAT_RX_TOTAL);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = 3, .dstPort = kOld, .size = size200}), "");
    ASSERT_TRUE(xdpSaw(rig, rx, 3));
    const nlohmann::json old = flowOnPort(rig, kOld);
    ASSERT_FALSE(old.is_null());
    EXPECT_EQ(old["xdp"]["pass_no_socket"], 3) << old.dump();
    EXPECT_EQ(old["passed"], 3) << old.dump();
    EXPECT_EQ(old["reached"], 3) << old.dump();

    ASSERT_TRUE(rig.npfctlOk("flow del " + rig.rxIf() + " " + std::to_string(kOld)));
    ASSERT_TRUE(rig.npfctlOk("flow add " + rig.rxIf() + " " + std::to_string(kNew)));
    const nlohmann::json fresh = flowOnPort(rig, kNew);
    ASSERT_FALSE(fresh.is_null());
    ASSERT_EQ(fresh["id"], old["id"]) << "the lowest free id goes to the new flow";
    EXPECT_EQ(fresh["reached"], 0) << fresh.dump();
    for (const auto& [name, n] : fresh["xdp"].items())
        EXPECT_EQ(n, 0) << name << ": the new flow inherited the old one's counts";

    // The old flow's entry as an XDP run that looked it up before the delete
    // still sees it: id and generation of the old flow.
    test::NetnsGuard in(rig.veth().rxNs());
    dataplane::Dataplane dp = dataplane::Dataplane::open(rig.rxIf());
    uint32_t newGen = 0;
    for (const dataplane::FlowInfo& fi : dataplane::listFlows(dp))
        if (fi.spec.port == kNew)
            newGen = fi.gen;
    ASSERT_GT(newGen, 1u);
    const npf_flow_key key = dataplane::toKey(dataplane::parseFlowSpec(std::to_string(kOld)));
    const npf_flow stale{.id = old["id"].get<uint32_t>(), .gen = newGen - 1, .region_size = 0};
    ASSERT_EQ(bpf_map_update_elem(dp.flows(), &key, &stale, BPF_NOEXIST), 0);
    const uint64_t passed0 = rig.xdpStat(NPF_STAT_PASS_NO_SOCKET);
    rx = rig.xdpStat(NPF_STAT_RX_TOTAL);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = 2, .dstPort = kOld, .size = size200}), "");
    ASSERT_TRUE(xdpSaw(rig, rx, 2));
    EXPECT_EQ(rig.xdpStat(NPF_STAT_PASS_NO_SOCKET) - passed0, 2u) << "counted in npf_stats";
    const nlohmann::json after = flowOnPort(rig, kNew);
    EXPECT_EQ(after["reached"], 0) << "an old-generation datagram counted for the new flow: " << after.dump();
    const nlohmann::json staleRow = flowOnPort(rig, kOld);
    EXPECT_EQ(staleRow["reached"], 0) << "counted for the stale entry: " << staleRow.dump();
    EXPECT_EQ(bpf_map_delete_elem(dp.flows(), &key), 0);
}

} // namespace
} // namespace npf::e2e
