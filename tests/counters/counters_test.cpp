// The counter tables of include/npf/counters.h (and region/region_stats.h)
// and NPF_STATS (npf/abi.h): the engine JSON written and read back from
// them, their names, and the lists in docs/cli.md ("Counters",
// "Accounting") that must agree with them; a flow's accounting (FlowStats) in
// JSON and its identity.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "counters/engine_stats.h"
#include "counters/flow_stats.h"
#include "dataplane/stats.h"
#include "doc_section.h"
#include "npf/counters.h"
#include "region/region_stats.h"

namespace npf::counters {
namespace {

// Every uint64_t word of EngineStats set to a distinct value through the
// tables; the words must all differ, so no field escapes the tables.
EngineStats distinctStats()
{
    EngineStats s;
    uint64_t v = 1000;
    for (const auto& d : kEngineCounters)
        s.*d.member = v++;
    for (const LatencyDef& d : kEngineLatencies)
        for (const QuantileDef& f : kLatencyFields)
            (s.*d.member).*f.member = v++;
    return s;
}

TEST(EngineCounters, TablesCoverEveryField)
{
    EngineStats s = distinctStats();
    std::vector<uint64_t> words(sizeof(EngineStats) / sizeof(uint64_t));
    std::memcpy(words.data(), &s, sizeof(EngineStats));
    std::set<uint64_t> distinct(words.begin(), words.end());
    EXPECT_EQ(distinct.size(), words.size());
    EXPECT_EQ(distinct.count(0), 0u);
}

bool snakeCase(const std::string& s)
{
    if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z') || s.back() == '_' || s.find("__") != std::string::npos)
        return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    return true;
}

template <typename Table>
void expectNames(const Table& t, const char* table)
{
    std::set<std::string> seen;
    for (const auto& d : t) {
        EXPECT_TRUE(snakeCase(d.name)) << table << ": " << d.name;
        EXPECT_TRUE(seen.insert(d.name).second) << table << ": duplicate " << d.name;
    }
}

template <typename Table>
void expectDescribed(const Table& t, const char* table)
{
    for (const auto& d : t) {
        EXPECT_GT(std::strlen(d.unit), 0u) << table << ": " << d.name;
        EXPECT_GT(std::strlen(d.help), 0u) << table << ": " << d.name;
        EXPECT_EQ(std::strchr(d.help, '\n'), nullptr) << table << ": " << d.name << " help is one line";
        EXPECT_EQ(std::strchr(d.help, '|'), nullptr) << table << ": " << d.name << " help goes into a table";
    }
}

TEST(EngineCounters, NamesUniqueSnakeCase)
{
    expectNames(kEngineCounters, "kEngineCounters");
    expectNames(kEngineLatencies, "kEngineLatencies");
    expectNames(kLatencyFields, "kLatencyFields");
    expectNames(kRegionCounters, "kRegionCounters");
    expectDescribed(kEngineCounters, "kEngineCounters");
    expectDescribed(kRegionCounters, "kRegionCounters");
    for (const LatencyDef& d : kEngineLatencies)
        EXPECT_GT(std::strlen(d.help), 0u) << d.name;
}

// NPF_STATS (npf/abi.h): the names are ABI (flow_spec_test pins some), the
// help lines go into docs/cli.md's table and Prometheus HELP.
TEST(XdpCounters, NamesUniqueSnakeCaseHelpOneLine)
{
    std::set<std::string> seen;
    for (size_t i = 0; i < std::size(dataplane::kStatNames); i++) {
        EXPECT_TRUE(snakeCase(dataplane::kStatNames[i])) << dataplane::kStatNames[i];
        EXPECT_TRUE(seen.insert(dataplane::kStatNames[i]).second) << "duplicate " << dataplane::kStatNames[i];
        EXPECT_GT(std::strlen(dataplane::kStatHelp[i]), 0u) << dataplane::kStatNames[i];
        EXPECT_EQ(std::strpbrk(dataplane::kStatHelp[i], "\n|"), nullptr) << dataplane::kStatNames[i] << ": help is one line, no '|'";
    }
}

// The JSON snapshot's keys are read by scripts, bench/scenarios.cpp and the
// engine tests: this is the contract, spelled out once more on purpose.
TEST(EngineCounters, JsonKeysUnchanged)
{
    Json j = engineStatsJson(EngineStats{}, "veth0", 42, 7);
    std::vector<std::string> top, counters, latency;
    for (auto& [k, v] : j.items())
        top.push_back(k);
    for (auto& [k, v] : j["counters"].items())
        counters.push_back(k);
    for (auto& [k, v] : j["latency"].items()) {
        latency.push_back(k);
        std::vector<std::string> q;
        for (auto& [f, x] : v.items())
            q.push_back(f);
        EXPECT_EQ(q, (std::vector<std::string>{"count", "p50_ns", "p99_ns", "p999_ns", "max_ns"})) << k;
    }
    EXPECT_EQ(top, (std::vector<std::string>{"interface", "pid", "time_ns", "counters", "latency"}));
    EXPECT_EQ(counters, (std::vector<std::string>{
                            "fast_path", "fault_path", "deferred", "bad_meta", "rejected", "mismatch",
                            "place_errors", "fault_drops", "defer_drops", "csum_errors", "late", "completed_ok",
                            "completed_truncated", "completed_lost", "completed_bad_csum", "cpu_faults",
                            "packet_faults", "prefetched", "evicted", "restored", "resident_pages",
                            "pinned_bytes", "kernel_rx_dropped", "fault_batches_1", "fault_batches_2_3",
                            "fault_batches_4_7", "fault_batches_8_15", "fault_batches_16_31", "fault_batches_32_up"}));
    EXPECT_EQ(latency, (std::vector<std::string>{"steer_to_pickup", "pickup_to_image", "image_to_copy",
                                                 "complete_to_publish", "fault_total", "fast_total",
                                                 "copy_to_complete", "fault_complete_to_publish"}));
    EXPECT_EQ(j["interface"], "veth0");
    EXPECT_EQ(j["pid"], 42);
    EXPECT_EQ(j["time_ns"], 7u);
}

TEST(EngineCounters, JsonRoundTrip)
{
    const EngineStats s = distinctStats();
    Json j = engineStatsJson(s, "veth0", 42, 7);
    for (const auto& d : kEngineCounters)
        EXPECT_EQ(j["counters"][d.name].get<uint64_t>(), s.*d.member) << d.name;
    EXPECT_EQ(parseEngineStats(j), s);
    // Through text, as npfctl reads the file.
    EXPECT_EQ(parseEngineStats(Json::parse(j.dump())), s);
}

TEST(EngineCounters, ParseToleratesMissingAndWrongKeys)
{
    EXPECT_EQ(parseEngineStats(Json::parse("null")), EngineStats{});
    EXPECT_EQ(parseEngineStats(Json::parse(R"({"counters": [1, 2], "latency": 3})")), EngineStats{});
    Json j = Json::parse(R"({"counters": {"fast_path": 5, "late": -1, "evicted": "9", "unknown": 3},
                             "latency": {"fault_total": {"p99_ns": 700, "max_ns": null}, "fast_total": 1}})");
    EngineStats want;
    want.fastPath = 5;
    want.faultTotal.p99 = 700;
    EXPECT_EQ(parseEngineStats(j), want);
}

// What `npfctl stats` reads back from an engine's snapshot file: table
// order, latency quantiles flattened; nothing from a dead writer.
TEST(EngineCounters, NpfctlRowsFromSnapshot)
{
    namespace fs = std::filesystem;
    const std::string ifname = "npfct" + std::to_string(::getpid());
    const fs::path path = engineStatsPath(ifname);
    const fs::path nsDir = path.parent_path().parent_path();
    const bool hadNsDir = fs::exists(nsDir);
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path);
    if (!out)
        GTEST_SKIP() << "cannot write " << path << " (needs root)";
    const EngineStats s = distinctStats();
    RegionStats r;
    uint64_t v = 7000;
    for (const auto& d : kRegionCounters)
        r.*d.member = v++;
    Json snapshot = engineStatsJson(s, ifname, ::getpid(), 1);
    addRegionStats(snapshot, r);
    out << snapshot.dump();
    out.close();

    Counters c = engineCounters(ifname);
    ASSERT_EQ(c.size(),
              kEngineCounters.size() + kEngineLatencies.size() * kLatencyFields.size() + kRegionCounters.size());
    size_t i = 0;
    for (const auto& d : kEngineCounters) {
        EXPECT_EQ(c[i].group, "engine");
        EXPECT_EQ(c[i].name, d.name);
        EXPECT_EQ(c[i].value, s.*d.member);
        ++i;
    }
    EXPECT_EQ(c[i].group, "latency");
    EXPECT_EQ(c[i].name, "steer_to_pickup_count");
    i += kEngineLatencies.size() * kLatencyFields.size();
    EXPECT_EQ(c[i - 1].name, std::string(kEngineLatencies.back().name) + "_max_ns");
    EXPECT_EQ(c[i - 1].value, (s.*kEngineLatencies.back().member).max);
    for (const auto& d : kRegionCounters) {
        EXPECT_EQ(c[i].group, "region");
        EXPECT_EQ(c[i].name, d.name);
        EXPECT_EQ(c[i].value, r.*d.member);
        ++i;
    }

    std::ofstream(path) << engineStatsJson(s, ifname, 0x7ffffff0, 1).dump(); // no such pid
    EXPECT_TRUE(engineCounters(ifname).empty());
    fs::remove_all(path.parent_path(), ec);
    if (!hadNsDir)
        fs::remove(nsDir, ec); // only if still empty
}

TEST(EngineCounters, FormatCounters)
{
    EngineStats s;
    s.fastPath = 3;
    s.pinnedBytes = 1 << 20;
    s.placeErrors = 0;
    EXPECT_EQ(formatCounters(s, {&EngineStats::fastPath, &EngineStats::placeErrors, &EngineStats::pinnedBytes}),
              "fast_path=3 place_errors=0 pinned_bytes=1048576");
    EXPECT_EQ(formatCounters(s, {}), "");
    Json j = Json::object();
    addCounters(j, s, {&EngineStats::pinnedBytes, &EngineStats::fastPath});
    EXPECT_EQ(j.dump(), R"({"pinned_bytes":1048576,"fast_path":3})");
}

// docs/cli.md "Counters", as the tables say it should read.
std::string expectedDocRows()
{
    std::string out = "| counter | unit | kind | help |\n|---|---|---|---|\n";
    for (const auto& d : kEngineCounters)
        out += std::string("| `") + d.name + "` | " + d.unit + " | " + (d.gauge ? "gauge" : "counter") + " | " +
               d.help + " |\n";
    out += "\n| region counter | unit | help |\n|---|---|---|\n";
    for (const auto& d : kRegionCounters)
        out += std::string("| `") + d.name + "` | " + d.unit + " | " + d.help + " |\n";
    out += "\n| latency | help |\n|---|---|\n";
    for (const LatencyDef& d : kEngineLatencies)
        out += std::string("| `") + d.name + "` | " + d.help + " |\n";
    out += "\n| xdp counter | help |\n|---|---|\n";
    for (size_t i = 0; i < std::size(dataplane::kStatNames); i++)
        out += std::string("| `") + dataplane::kStatNames[i] + "` | " + dataplane::kStatHelp[i] + " |\n";
    return out;
}

// The table rows ("|" lines) of docs/cli.md's "## Counters" section, with a
// blank line between tables.
std::string docRows()
{
    std::string out;
    bool lastWasRow = false;
    for (const std::string& line : test::docSection(NPF_CLI_MD, "## Counters")) {
        bool row = line.rfind("|", 0) == 0;
        if (row && !lastWasRow && !out.empty())
            out += "\n";
        if (row)
            out += line + "\n";
        lastWasRow = row;
    }
    return out;
}

TEST(EngineCounters, DocsListEveryCounter)
{
    std::ifstream in(NPF_CLI_MD);
    ASSERT_TRUE(in) << NPF_CLI_MD;
    EXPECT_EQ(docRows(), expectedDocRows())
        << "docs/cli.md \"## Counters\" disagrees with include/npf/counters.h or NPF_STATS (npf/abi.h); its "
           "tables should read:\n\n"
        << expectedDocRows();
}

// FlowStats with every counter distinct (xdp outcomes 100.., the rest 1000..).
FlowStats distinctFlowStats()
{
    FlowStats f;
    for (size_t i = 0; i < f.xdp.size(); i++)
        f.xdp[i] = 100 + i;
    uint64_t v = 1000;
    for (const auto& c : kFlowCounters)
        f.*c.member = v++;
    return f;
}

TEST(FlowCounters, JsonRoundTripAndTheIdentitysTerms)
{
    const FlowStats f = distinctFlowStats();
    const Json j = flowStatsJson(f);
    EXPECT_EQ(parseFlowStats(Json::parse(j.dump())), f);
    EXPECT_EQ(j["xdp"].size(), size_t(NPF_FLOW_STAT_MAX));
    EXPECT_EQ(j["xdp"]["drop_rnr"].get<uint64_t>(), f.xdpCount(NPF_STAT_DROP_RNR));
    EXPECT_EQ(j["reached"].get<uint64_t>(), j["passed"].get<uint64_t>() + j["dropped_in_xdp"].get<uint64_t>() +
                                                j["claimed"].get<uint64_t>());
    // truncated is no outcome: it is not part of reached.
    FlowStats t;
    t.xdp[NPF_STAT_TRUNCATED - NPF_STAT_FLOW_FIRST] = 5;
    t.xdp[NPF_STAT_REDIR_PRIMARY - NPF_STAT_FLOW_FIRST] = 7;
    EXPECT_EQ(t.reached(), 7u);
    EXPECT_EQ(t.claimed(), 7u);
    EXPECT_EQ(t.xdpCount(NPF_STAT_RX_TOTAL), 0u) << "not a flow's counter";
}

TEST(FlowCounters, SocketDropsAreTheUnarrivedLostsXdpDidNotDrop)
{
    FlowStats f;
    f.lostUnarrived = 10;
    f.xdp[NPF_STAT_DROP_BAD_DESC - NPF_STAT_FLOW_FIRST] = 2;
    f.xdp[NPF_STAT_REDIR_FAIL - NPF_STAT_FLOW_FIRST] = 1;
    f.late = 3;
    EXPECT_EQ(f.socketDropped(), 4u);
    f.lostUnarrived = 2; // the claims XDP dropped have not timed out yet
    EXPECT_EQ(f.socketDropped(), 0u);
}

// npfd's reply is a peer's word: parsed strictly, every key required.
TEST(FlowCounters, ParseRefusesMissingOrWrongKeys)
{
    const Json good = flowStatsJson(distinctFlowStats());
    for (const char* key : {"completed_ok", "in_flight", "late"}) {
        Json j = good;
        j.erase(key);
        EXPECT_THROW(parseFlowStats(j), std::invalid_argument) << key;
        j[key] = -1;
        EXPECT_THROW(parseFlowStats(j), std::invalid_argument) << key;
        j[key] = "1";
        EXPECT_THROW(parseFlowStats(j), std::invalid_argument) << key;
    }
    Json j = good;
    j["xdp"].erase("drop_rnr");
    EXPECT_THROW(parseFlowStats(j), std::invalid_argument);
    EXPECT_THROW(parseFlowStats(Json::parse("null")), std::invalid_argument);
    EXPECT_THROW(parseFlowStats(Json::parse(R"({"xdp": []})")), std::invalid_argument);
}

TEST(FlowCounters, FormatListsTheNonZeroOutcomesPicked)
{
    FlowStats f;
    f.xdp[NPF_STAT_DROP_RNR - NPF_STAT_FLOW_FIRST] = 3;
    f.xdp[NPF_STAT_PASS_NO_SOCKET - NPF_STAT_FLOW_FIRST] = 2;
    f.xdp[NPF_STAT_REDIR_PRIMARY - NPF_STAT_FLOW_FIRST] = 9;
    EXPECT_EQ(formatFlowXdp(f, FlowOutcomes::All), "pass_no_socket=2 drop_rnr=3 redir_primary=9");
    EXPECT_EQ(formatFlowXdp(f, FlowOutcomes::Dropped), "drop_rnr=3");
    EXPECT_EQ(formatFlowXdp(f, FlowOutcomes::Passed), "pass_no_socket=2");
    EXPECT_EQ(formatFlowXdp(FlowStats{}, FlowOutcomes::All), "");
}

TEST(FlowCounters, DocsListEveryCounter)
{
    std::string want = "| counter | unit | kind | help |\n|---|---|---|---|\n";
    for (const auto& c : kFlowCounters)
        want += std::string("| `") + c.name + "` | " + c.unit + " | " + (c.gauge ? "gauge" : "counter") + " | " +
                c.help + " |\n";
    std::string got;
    for (const std::string& line : test::docSection(NPF_CLI_MD, "## Accounting"))
        if (line.rfind("| counter |", 0) == 0 || (!got.empty() && line.rfind("|", 0) == 0))
            got += line + "\n";
        else if (!got.empty())
            break;
    EXPECT_EQ(got, want) << "docs/cli.md \"## Accounting\" disagrees with kFlowCounters (npf/counters.h); its table "
                            "should read:\n\n"
                         << want;
}

} // namespace
} // namespace npf::counters
