// npfd --metrics: the Prometheus endpoint, scraped over HTTP from inside the
// rx namespace while an npf::Client flow receives N datagrams. Every table
// entry is there once with HELP and TYPE, values are numbers, no series
// twice; the counters moved by exactly what was sent and stay put when the
// client leaves. docs/cli.md lists the names the tables give (no root).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "ctl/exit_codes.h"
#include "ctl/stats.h"
#include "engine_fixture.h"
#include "netns.h"
#include "npf/client.h"
#include "npf/counters.h"
#include "npfd_rig.h"
#include "wait.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

// The naming rule, spelled out here once more on purpose (docs/cli.md):
// npf_<name>, _total unless a gauge; XDP counters npf_xdp_<name>_total
// (rx_total keeps one _total); latencies npf_latency_<name>_seconds.
std::string counterName(const CounterDef<EngineStats>& c)
{
    return std::string("npf_") + c.name + (c.gauge ? "" : "_total");
}
std::string xdpName(const std::string& n)
{
    return "npf_xdp_" + n + (n.ends_with("_total") ? "" : "_total");
}
std::string latencyName(const LatencyDef& l) { return std::string("npf_latency_") + l.name + "_seconds"; }

// ---- docs ------------------------------------------------------------------------

std::string expectedDocNames()
{
    std::ostringstream out;
    auto row = [&](const std::string& name, const char* type) { out << std::left << std::setw(44) << name << type << "\n"; };
    for (const auto& c : kEngineCounters)
        row(counterName(c), c.gauge ? "gauge" : "counter");
    for (const char* n : ctl::kStatNames)
        row(xdpName(n), "counter");
    for (const LatencyDef& l : kEngineLatencies)
        row(latencyName(l), "summary");
    row("npf_clients", "gauge");
    row("npf_flow_completed_total", "counter");
    return out.str();
}

// The lines of the fenced blocks of docs/cli.md's "## Counters" section.
std::string docNames()
{
    std::ifstream in(NPF_CLI_MD);
    std::string line, out;
    bool inSection = false, inFence = false;
    while (std::getline(in, line)) {
        if (line.rfind("## ", 0) == 0) {
            inSection = line == "## Counters";
            continue;
        }
        if (!inSection)
            continue;
        if (line.rfind("```", 0) == 0) {
            inFence = !inFence;
            continue;
        }
        if (inFence)
            out += line + "\n";
    }
    return out;
}

TEST(NpfdMetricsDocs, CliMdListsEveryPrometheusName)
{
    ASSERT_TRUE(std::ifstream(NPF_CLI_MD)) << NPF_CLI_MD;
    EXPECT_EQ(docNames(), expectedDocNames())
        << "docs/cli.md \"## Counters\": the Prometheus names should read:\n\n```\n" << expectedDocNames() << "```\n";
}

// ---- a scrape --------------------------------------------------------------------

struct Scrape {
    std::map<std::string, std::string> help, type; // by family
    std::map<std::string, double> series;          // "name{labels}" -> value
    std::vector<std::string> errors;               // format problems

    bool has(const std::string& s) const { return series.count(s) != 0; }
    double at(const std::string& s) const
    {
        auto it = series.find(s);
        return it == series.end() ? std::nan("") : it->second;
    }
};

bool parseNumber(const std::string& s, double& v)
{
    if (s == "NaN" || s == "Nan" || s == "+Inf" || s == "-Inf") {
        v = s == "NaN" || s == "Nan" ? std::nan("") : (s[0] == '+' ? INFINITY : -INFINITY);
        return true;
    }
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return !s.empty() && *end == '\0';
}

Scrape parse(const std::string& body)
{
    Scrape r;
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty())
            continue;
        std::istringstream ls(line);
        if (line[0] == '#') {
            std::string hash, kind, name, rest;
            ls >> hash >> kind >> name;
            std::getline(ls, rest);
            if (!rest.empty() && rest[0] == ' ')
                rest.erase(0, 1);
            auto& m = kind == "HELP" ? r.help : r.type;
            if (kind != "HELP" && kind != "TYPE")
                continue;
            if (!m.emplace(name, rest).second)
                r.errors.push_back("# " + kind + " twice for " + name);
            continue;
        }
        // name{labels} value  (label values here contain no spaces)
        const size_t sp = line.rfind(' ');
        const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
        double v = 0;
        if (sp == std::string::npos || !parseNumber(value, v))
            r.errors.push_back("not a number: " + line);
        if (!r.series.emplace(key, v).second)
            r.errors.push_back("series twice: " + key);
    }
    return r;
}

// GET /metrics from 127.0.0.1:port in the rx namespace; the body, or "" when
// npfd did not answer 200.
std::string httpGet(Rig& rig, uint16_t port)
{
    test::NetnsGuard in(rig.veth().rxNs());
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
        return "";
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size()))
        return "";
    std::string resp;
    char buf[65536];
    for (ssize_t n; (n = ::recv(fd.get(), buf, sizeof(buf), 0)) > 0;)
        resp.append(buf, size_t(n));
    const size_t head = resp.find("\r\n\r\n");
    if (resp.rfind("HTTP/1.", 0) != 0 || resp.find(" 200 ") > resp.find("\r\n") || head == std::string::npos)
        return "";
    return resp.substr(head + 4);
}

// A TCP socket bound to 127.0.0.1 on a port the kernel picks (*port), in
// the rx namespace.
Fd loopbackSocket(Rig& rig, uint16_t* port)
{
    test::NetnsGuard in(rig.veth().rxNs());
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("loopbackSocket: no port");
    *port = ntohs(a.sin_port);
    return fd;
}

// A port nothing listens on in the rx namespace (the kernel picks it).
uint16_t freePort(Rig& rig)
{
    uint16_t port = 0;
    (void)loopbackSocket(rig, &port);
    return port;
}

class NpfdMetrics : public EngineE2E {};

TEST_F(NpfdMetrics, ScrapeHasEveryTableEntryAndCountsWhatWasSent)
{
    Rig rig;
    TempDir dir;
    const uint16_t mport = freePort(rig);
    Npfd npfd(rig, dir, {"--metrics", "127.0.0.1:" + std::to_string(mport)});
    const std::string iface = "{iface=\"" + rig.rxIf() + "\"}";
    auto series = [&](const std::string& name) { return name + iface; };
    auto quantile = [&](const std::string& name, const char* q) {
        return name + "{iface=\"" + rig.rxIf() + "\",quantile=\"" + q + "\"}";
    };

    // npfd was ready (its exporter listening) before the rig returned.
    const std::string first = httpGet(rig, mport);
    ASSERT_NE(first, "") << npfd.log();
    const Scrape before = parse(first);
    EXPECT_TRUE(before.errors.empty()) << ::testing::PrintToString(before.errors) << "\n" << first;

    // Every table entry: HELP, TYPE, one series for the interface.
    auto expectFamily = [&](const Scrape& s, const std::string& name, const std::string& type) {
        EXPECT_TRUE(s.help.count(name) && !s.help.at(name).empty()) << "no HELP for " << name;
        EXPECT_EQ(s.type.count(name) ? s.type.at(name) : "", type) << name;
    };
    for (const auto& c : kEngineCounters) {
        const std::string n = counterName(c);
        expectFamily(before, n, c.gauge ? "gauge" : "counter");
        EXPECT_TRUE(before.has(series(n))) << n;
        EXPECT_NE(before.help.count(n) ? before.help.at(n).find(c.help) : std::string::npos, std::string::npos)
            << n << ": help from the table";
    }
    for (const char* x : ctl::kStatNames) {
        expectFamily(before, xdpName(x), "counter");
        EXPECT_TRUE(before.has(series(xdpName(x)))) << x;
    }
    for (const LatencyDef& l : kEngineLatencies) {
        const std::string n = latencyName(l);
        expectFamily(before, n, "summary");
        for (const char* q : {"0.5", "0.99", "0.999"})
            EXPECT_TRUE(before.has(quantile(n, q))) << n << " quantile " << q;
        EXPECT_TRUE(before.has(series(n + "_count"))) << n;
    }
    // No npf_ family but the tables' (prometheus-cpp adds its exposer_* ones).
    size_t npfFamilies = 0;
    for (const auto& [name, type] : before.type)
        npfFamilies += name.rfind("npf_", 0) == 0;
    EXPECT_EQ(npfFamilies,
              kEngineCounters.size() + std::size(ctl::kStatNames) + kEngineLatencies.size() + 2); // + npf_clients, npf_flow_completed_total
    expectFamily(before, "npf_clients", "gauge");
    expectFamily(before, "npf_flow_completed_total", "counter");
    EXPECT_EQ(before.at("npf_clients"), 0);

    constexpr uint32_t kN = 64;
    const uint16_t port = kFirstPort + 60;
    {
        Client cli({.socket = npfd.socket(), .regionSize = 4 << 20, .name = "metrics"});
        Flow& f = cli.openFlow(port);
        for (uint32_t i = 0; i < kN; i++)
            ASSERT_TRUE(f.post(i * 4096, 2048));
        f.flush();
        Sender tx(rig.veth(), {.sender = 3, .count = kN, .dstPort = port, .size = [](uint32_t) { return 900u; }});
        tx.start();
        tx.join();
        ASSERT_EQ(tx.error(), "");
        npf_completion c[kN];
        ASSERT_EQ(awaitCompletions(f, c), kN) << npfd.log();
        // While it is connected: its flow's series, by status.
        const Scrape during = parse(httpGet(rig, mport));
        const std::string flow = "npf_flow_completed_total{iface=\"" + rig.rxIf() + "\",port=\"" +
                                 std::to_string(port) + "\",client=\"metrics\",uid=\"0\",status=\"";
        EXPECT_EQ(during.at(flow + "ok\"}"), kN);
        for (const char* st : {"truncated", "lost", "bad_csum"})
            EXPECT_EQ(during.at(flow + st + "\"}"), 0) << st;
        EXPECT_EQ(during.at("npf_clients"), 1);
    }
    // The client has gone: its completions stay in the totals.
    const std::string ok = series("npf_completed_ok_total");
    Scrape after;
    std::string body;
    EXPECT_TRUE(test::waitUntil([&] {
        body = httpGet(rig, mport);
        after = parse(body);
        return after.at(ok) - before.at(ok) >= kN;
    })) << body;
    EXPECT_TRUE(after.errors.empty()) << ::testing::PrintToString(after.errors);
    auto delta = [&](const std::string& name) { return after.at(series(name)) - before.at(series(name)); };
    EXPECT_EQ(delta("npf_completed_ok_total"), kN);
    EXPECT_EQ(delta("npf_fast_path_total") + delta("npf_fault_path_total"), kN);
    for (const char* lost : {"npf_completed_lost_total", "npf_completed_truncated_total",
                             "npf_completed_bad_csum_total", "npf_rejected_total", "npf_mismatch_total"})
        EXPECT_EQ(delta(lost), 0) << lost;
    EXPECT_GE(delta(xdpName("rx_total")), kN);
    EXPECT_EQ(delta(xdpName("redir_primary")) + delta(xdpName("redir_backup")), kN);
    EXPECT_EQ(delta(xdpName("redir_fail")), 0);
    // Counters never go down; latencies were recorded for the datagrams.
    for (const auto& c : kEngineCounters) {
        if (!c.gauge) {
            EXPECT_GE(delta(counterName(c)), 0) << c.name;
        }
    }
    for (const char* x : ctl::kStatNames)
        EXPECT_GE(delta(xdpName(x)), 0) << x;
    EXPECT_GE(delta(latencyName(kEngineLatencies[4]) + "_count") + delta(latencyName(kEngineLatencies[5]) + "_count"),
              kN)
        << "fault_total + fast_total";
    for (const LatencyDef& l : kEngineLatencies)
        for (const char* q : {"0.5", "0.99", "0.999", "1"}) {
            const double v = after.at(quantile(latencyName(l), q));
            EXPECT_TRUE(std::isfinite(v) && v >= 0 && v < 60) << latencyName(l) << " " << q << ": " << v << " s";
        }
    EXPECT_GT(after.at(series("npf_pinned_bytes")), 0);
}

// A malformed address is a usage error (before any interface is touched);
// a port already taken fails npfd's start.
TEST_F(NpfdMetrics, AnAddressItCannotUseFailsTheStart)
{
    Rig rig;
    TempDir dir;
    auto exitOf = [&](const std::string& metrics) {
        Child c(rig.veth().rxNs().path(),
                {NPFD_PATH, "-i", rig.rxIf(), "--socket", dir.path + "/s.sock", "--metrics", metrics},
                dir.path + "/npfd.log");
        int st = -1;
        return c.wait(int(test::kDeadline.count()), &st) ? st : -1;
    };
    for (const char* bad : {"not-an-address", "127.0.0.1:", "127.0.0.1:70000", "::1:9100"})
        EXPECT_EQ(exitOf(bad), ctl::kExitUsage) << bad;

    uint16_t port = 0;
    const Fd taken = loopbackSocket(rig, &port);
    ASSERT_EQ(::listen(taken.get(), 1), 0);
    const int st = exitOf("127.0.0.1:" + std::to_string(port));
    EXPECT_NE(st, 0);
    EXPECT_NE(st, -1) << "npfd did not exit";
}

} // namespace
} // namespace npf::e2e
