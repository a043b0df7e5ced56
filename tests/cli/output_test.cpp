// Shapes of what npfctl prints: JSON keys and types, fixed table columns,
// per-second rates, and the libbpf/libxdp log capture.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/json.h"
#include "dataplane/lib_log.h"
#include "format.h"

namespace npf::cli {
namespace {

dataplane::InstanceStatus attachedStatus()
{
    dataplane::InstanceStatus s;
    s.ifname = "veth0";
    s.ifindex = 7;
    s.state = dataplane::InstanceState::Attached;
    s.mode = dataplane::AttachMode::Native;
    s.progId = 42;
    s.flows = 2;
    s.queues = 4;
    s.regions = 3;
    s.slots = {{0, 0}, {1, 0}, {6, 3}};
    s.boundQueues = dataplane::slotQueues(s.slots);
    s.sockets = {{1234, 0, 7, 0, 1}};
    s.foreign = {};
    return s;
}

std::vector<std::string> words(const std::string& line)
{
    std::istringstream in(line);
    std::vector<std::string> w;
    for (std::string x; in >> x;)
        w.push_back(x);
    return w;
}

std::vector<std::string> lines(const std::string& text)
{
    std::istringstream in(text);
    std::vector<std::string> l;
    for (std::string x; std::getline(in, x);)
        l.push_back(x);
    return l;
}

TEST(StatusJson, Shape)
{
    Json j = toJson(attachedStatus());
    const char* keys[] = {"interface", "ifindex",      "state",     "mode",    "prog_id",
                          "flows",     "queues",       "regions", "bound_queues", "xsk_slots",
                          "sockets",   "foreign_programs", "next_program"};
    size_t i = 0;
    for (auto it = j.begin(); it != j.end(); ++it, ++i) {
        ASSERT_LT(i, std::size(keys));
        EXPECT_EQ(it.key(), keys[i]);
    }
    EXPECT_EQ(i, std::size(keys));
    EXPECT_EQ(j["state"], "attached");
    EXPECT_EQ(j["mode"], "native");
    EXPECT_EQ(j["prog_id"], 42);
    EXPECT_EQ(j["bound_queues"], Json::array({0, 3}));
    ASSERT_EQ(j["xsk_slots"].size(), 3u);
    EXPECT_EQ(j["xsk_slots"][1]["role"], "backup");
    EXPECT_EQ(j["xsk_slots"][2]["queue"], 3);
    EXPECT_EQ(j["sockets"][0]["inode"], 1234);
    EXPECT_FALSE(j.contains("problem"));
    EXPECT_TRUE(j["next_program"].is_null());
}

TEST(StatusJson, ChainedProgram)
{
    dataplane::InstanceStatus s = attachedStatus();
    s.chained = dataplane::ChainedProgram{150, "cni_xdp"};
    Json j = toJson(s);
    EXPECT_EQ(j["next_program"], Json({{"id", 150}, {"name", "cni_xdp"}}));
}

TEST(StatusJson, NotAttachedHasNullMode)
{
    dataplane::InstanceStatus s;
    s.ifname = "eth0";
    s.problem = "something";
    Json j = toJson(s);
    EXPECT_EQ(j["state"], "none");
    EXPECT_TRUE(j["mode"].is_null());
    EXPECT_TRUE(j["bound_queues"].is_array());
    EXPECT_EQ(j["problem"], "something");
}

TEST(FlowJson, Shape)
{
    dataplane::FlowInfo any{3, dataplane::parseFlowSpec("5000"), 10, 7};
    dataplane::FlowInfo v4{0, dataplane::parseFlowSpec("53", "198.18.0.1"), 0, 0};
    Json a = toJson(std::vector<dataplane::FlowInfo>{v4, any});
    ASSERT_TRUE(a.is_array());
    EXPECT_EQ(a[0]["addr"], "198.18.0.1");
    EXPECT_EQ(a[0]["family"], 4);
    EXPECT_TRUE(a[1]["addr"].is_null());
    EXPECT_EQ(a[1]["id"], 3);
    EXPECT_EQ(a[1]["port"], 5000);
    EXPECT_EQ(a[1]["posted"], 10);
    EXPECT_EQ(a[1]["consumed"], 7);
    // Every per-flow outcome by name, all 0 here, and the sums.
    ASSERT_TRUE(a[1]["xdp"].is_object());
    EXPECT_EQ(a[1]["xdp"].size(), static_cast<size_t>(NPF_FLOW_STAT_MAX));
    EXPECT_EQ(a[1]["xdp"].begin().key(), "pass_bad_queue");
    EXPECT_EQ(a[1]["xdp"]["drop_rnr"], 0);
    EXPECT_EQ(a[1]["xdp"]["truncated"], 0);
    for (const char* k : {"reached", "claimed", "dropped", "passed"})
        EXPECT_EQ(a[1][k], 0) << k;
}

dataplane::FlowXdpStats flowXdp(std::initializer_list<std::pair<npf_stat, uint64_t>> counts)
{
    dataplane::FlowXdpStats x{};
    for (const auto& [s, n] : counts)
        x[s - NPF_STAT_FLOW_FIRST] = n;
    return x;
}

// The four sums of `flow list` from the flow's outcomes: each outcome in the
// right ones, truncated (not an outcome) in none.
TEST(FlowSums, FromOutcomes)
{
    const dataplane::FlowXdpStats x =
        flowXdp({{NPF_STAT_PASS_BAD_QUEUE, 1}, {NPF_STAT_PASS_NO_SOCKET, 2}, {NPF_STAT_PASS_TOO_BIG, 4},
                 {NPF_STAT_PASS_META_FAIL, 8}, {NPF_STAT_DROP_RNR, 16}, {NPF_STAT_DROP_BAD_DESC, 32},
                 {NPF_STAT_DROP_CONTENDED, 64}, {NPF_STAT_DROP_CSUM, 128}, {NPF_STAT_REDIR_PRIMARY, 256},
                 {NPF_STAT_REDIR_BACKUP, 512}, {NPF_STAT_REDIR_FAIL, 1024}, {NPF_STAT_TRUNCATED, 2048}});
    const FlowSums s = flowSums(x);
    EXPECT_EQ(s.reached, 2047u);
    EXPECT_EQ(s.passed, 1u + 2 + 4 + 8);
    EXPECT_EQ(s.claimed, 256u + 512 + 1024 + 32);
    EXPECT_EQ(s.dropped, 16u + 32 + 64 + 128 + 1024);
}

TEST(FlowJson, OutcomesByName)
{
    dataplane::FlowInfo f{2, dataplane::parseFlowSpec("5000"), 5, 3};
    f.xdp = flowXdp({{NPF_STAT_DROP_RNR, 7}, {NPF_STAT_REDIR_PRIMARY, 3}, {NPF_STAT_TRUNCATED, 1}});
    Json j = toJson(f);
    EXPECT_EQ(j["xdp"]["drop_rnr"], 7);
    EXPECT_EQ(j["xdp"]["redir_primary"], 3);
    EXPECT_EQ(j["xdp"]["truncated"], 1);
    EXPECT_EQ(j["xdp"]["redir_backup"], 0);
    EXPECT_EQ(j["reached"], 10);
    EXPECT_EQ(j["claimed"], 3);
    EXPECT_EQ(j["dropped"], 7);
    EXPECT_EQ(j["passed"], 0);
    size_t i = 0;
    for (const auto& [name, v] : j["xdp"].items())
        EXPECT_EQ(name, dataplane::kStatNames[NPF_STAT_FLOW_FIRST + i++]) << "in enum order";
}

TEST(CountersJson, GroupsInOrder)
{
    dataplane::XdpStats s{};
    s[NPF_STAT_RX_TOTAL] = 9;
    s[NPF_STAT_PASS_NO_SOCKET] = 5;
    counters::Counters c = counters::xdpCounters(s);
    c.push_back({"service", "completed", 3});
    Json j = toJson(c);
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j.begin().key(), "xdp");
    EXPECT_EQ(j["xdp"].size(), static_cast<size_t>(NPF_STAT_MAX));
    EXPECT_EQ(j["xdp"].begin().key(), "rx_total");
    EXPECT_EQ(j["xdp"]["pass_no_socket"], 5);
    EXPECT_EQ(j["service"]["completed"], 3);
}

TEST(Rates, PerSecondAndReset)
{
    counters::Counters prev = {{"xdp", "a", 100}, {"xdp", "b", 50}, {"xdp", "c", 10}};
    counters::Counters cur = {{"xdp", "a", 300}, {"xdp", "b", 20}, {"xdp", "c", 10}, {"svc", "new", 4}};
    std::vector<double> r = rates(prev, cur, 2.0);
    ASSERT_EQ(r.size(), 4u);
    EXPECT_DOUBLE_EQ(r[0], 100.0);
    EXPECT_DOUBLE_EQ(r[1], 10.0); // went backwards: counted from zero
    EXPECT_DOUBLE_EQ(r[2], 0.0);
    EXPECT_DOUBLE_EQ(r[3], 0.0); // no previous sample
    EXPECT_EQ(rates(prev, cur, 0.0), std::vector<double>(4, 0.0));
}

TEST(StatsJson, WithAndWithoutRates)
{
    counters::Counters c = counters::xdpCounters(dataplane::XdpStats{});
    Json once = statsJson("veth0", 5, "skb", c);
    EXPECT_EQ(once["interface"], "veth0");
    EXPECT_EQ(once["prog_id"], 5);
    EXPECT_EQ(once["mode"], "skb");
    EXPECT_TRUE(once["counters"]["xdp"].is_object());
    EXPECT_FALSE(once.contains("rates"));
    std::vector<double> r(c.size(), 1.5);
    Json watch = statsJson("veth0", 5, "skb", c, &r, 1.0);
    EXPECT_DOUBLE_EQ(watch["rates"]["xdp"]["rx_total"].get<double>(), 1.5);
    EXPECT_DOUBLE_EQ(watch["interval"].get<double>(), 1.0);
}

TEST(StatusTable, FixedColumns)
{
    dataplane::InstanceStatus stale;
    stale.ifname = "veth1";
    stale.state = dataplane::InstanceState::Stale;
    dataplane::InstanceStatus chained = attachedStatus();
    chained.ifname = "veth2";
    chained.chained = dataplane::ChainedProgram{150, "cni_xdp"};
    dataplane::InstanceStatus unnamed = chained;
    unnamed.ifname = "veth3";
    unnamed.chained->name = "";
    std::vector<std::string> l = lines(statusTable({attachedStatus(), stale, chained, unnamed}));
    ASSERT_EQ(l.size(), 5u);
    EXPECT_EQ(words(l[0]), (std::vector<std::string>{"INTERFACE", "STATE", "MODE", "PROG_ID", "FLOWS", "QUEUES",
                                                     "BOUND_QUEUES", "REGIONS", "NEXT"}));
    EXPECT_EQ(words(l[1]),
              (std::vector<std::string>{"veth0", "attached", "native", "42", "2", "4", "0,3", "3", "-"}));
    EXPECT_EQ(words(l[2]), (std::vector<std::string>{"veth1", "stale", "-", "-", "-", "-", "-", "-", "-"}));
    EXPECT_EQ(words(l[3]).back(), "150:cni_xdp");
    EXPECT_EQ(words(l[4]).back(), "150:?");
}

TEST(FlowTable, AnyAddressIsStar)
{
    dataplane::FlowInfo any{0, dataplane::parseFlowSpec("5000"), 4, 1};
    any.xdp = flowXdp({{NPF_STAT_REDIR_PRIMARY, 1}, {NPF_STAT_DROP_RNR, 6}, {NPF_STAT_PASS_NO_SOCKET, 2}});
    dataplane::FlowInfo v6{1, dataplane::parseFlowSpec("53", "fd00::1"), 0, 0};
    std::vector<std::string> l = lines(flowTable({FlowRow(any), FlowRow(v6)}));
    ASSERT_EQ(l.size(), 3u);
    EXPECT_EQ(words(l[0]), (std::vector<std::string>{"ID", "PORT", "ADDR", "POSTED", "CONSUMED", "REACHED", "CLAIMED",
                                                     "DROPPED", "PASSED", "CREDITS", "HELD"}));
    EXPECT_EQ(words(l[1]), (std::vector<std::string>{"0", "5000", "*", "4", "1", "9", "1", "6", "2", "-", "-"}));
    EXPECT_EQ(words(l[2]), (std::vector<std::string>{"1", "53", "fd00::1", "0", "0", "0", "0", "0", "0", "-", "-"}));
}

// An engine's flow joins the row of the same id and generation only; its
// credit counters show when it grants credits.
TEST(FlowTable, EngineFlowOfSameGeneration)
{
    dataplane::FlowInfo a{0, dataplane::parseFlowSpec("5000"), 4, 1}, b{1, dataplane::parseFlowSpec("5001"), 0, 0},
        c{2, dataplane::parseFlowSpec("5002"), 0, 0};
    a.gen = 3;
    b.gen = 7;
    c.gen = 1;
    counters::EngineFlows e;
    e.pid = 42;
    FlowStats sa;
    sa.creditsSent = 12;
    sa.creditWaits = 5;
    sa.completedOk = 99;
    e.flows = {{0, 3, true, sa}, {1, 6, true, sa}, {2, 1, false, sa}}; // flow 1: an earlier generation
    const std::vector<FlowRow> rows = flowRows({a, b, c}, e);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_TRUE(rows[0].engine.has_value());
    EXPECT_FALSE(rows[1].engine.has_value());
    EXPECT_TRUE(rows[2].engine.has_value());
    std::vector<std::string> l = lines(flowTable(rows));
    ASSERT_EQ(l.size(), 4u);
    EXPECT_EQ(words(l[1]).back(), "5");
    EXPECT_EQ(words(l[1])[words(l[1]).size() - 2], "12");
    EXPECT_EQ(words(l[2]).back(), "-"); // no engine serves this generation
    EXPECT_EQ(words(l[3]).back(), "-"); // served, credits off
    Json j = toJson(rows);
    EXPECT_EQ(j[0]["engine"]["credits"], true);
    EXPECT_EQ(j[0]["engine"]["credits_sent"], 12);
    EXPECT_EQ(j[0]["engine"]["credit_waits"], 5);
    EXPECT_EQ(j[0]["engine"]["completed_ok"], 99);
    EXPECT_TRUE(j[1]["engine"].is_null());
    EXPECT_EQ(j[2]["engine"]["credits"], false);
    // Without a live engine no row has one.
    for (const FlowRow& r : flowRows({a, b, c}, std::nullopt))
        EXPECT_FALSE(r.engine.has_value());
}

TEST(CounterTable, OneRowPerCounter)
{
    dataplane::XdpStats s{};
    s[NPF_STAT_DROP_RNR] = 77;
    counters::Counters c = counters::xdpCounters(s);
    std::vector<std::string> l = lines(counterTable(c));
    ASSERT_EQ(l.size(), c.size() + 1);
    EXPECT_EQ(words(l[1 + NPF_STAT_DROP_RNR]), (std::vector<std::string>{"xdp.drop_rnr", "77"}));
    std::vector<double> r(c.size(), 2.0);
    l = lines(counterTable(c, &r));
    EXPECT_EQ(words(l[0]).back(), "RATE/S");
    EXPECT_EQ(words(l[1 + NPF_STAT_DROP_RNR]), (std::vector<std::string>{"xdp.drop_rnr", "77", "2.0"}));
}

TEST(Format, HumanBytes)
{
    EXPECT_EQ(humanBytes(512), "512 B");
    EXPECT_EQ(humanBytes(4096), "4.0 KiB");
    EXPECT_EQ(humanBytes(1ull << 30), "1.0 GiB");
    EXPECT_EQ(humanBytes(NPF_MAX_REGION_PAGES * NPF_PAGE_SIZE), "1.0 TiB");
}

TEST(LibLogCapture, CapturesAndRestoresHooks)
{
    libbpf_print_fn_t before = libbpf_set_print(nullptr);
    libbpf_set_print(before);
    {
        dataplane::LibLogCapture cap;
        cap.add(true, "libxdp: Compatibility check for dispatcher program failed: Operation not permitted");
        cap.add(false, "libbpf: Kernel error message: Underlying driver does not support XDP in native mode");
        EXPECT_EQ(cap.after("dispatcher program failed: "), "Operation not permitted");
        EXPECT_EQ(cap.after("Kernel error message: "), "Underlying driver does not support XDP in native mode");
        EXPECT_EQ(cap.after("not there"), "");
        EXPECT_TRUE(cap.saw("Compatibility check"));
        libbpf_print_fn_t during = libbpf_set_print(nullptr);
        libbpf_set_print(during);
        EXPECT_NE(during, before); // the capture hook is installed
    }
    libbpf_print_fn_t after = libbpf_set_print(before);
    EXPECT_EQ(after, before);
}

} // namespace
} // namespace npf::cli
