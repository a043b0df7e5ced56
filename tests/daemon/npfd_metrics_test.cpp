// npfd --metrics: the Prometheus endpoint, scraped over HTTP from inside the
// rx namespace while an npf::Client flow receives N datagrams. Every table
// entry is there once with HELP and TYPE, values are numbers, no series
// twice; the counters moved by exactly what was sent and stay put when the
// client leaves, and its flow's own series go with it. docs/cli.md lists the
// names the tables give (no root).
// A hostile peer cannot starve it: 256 slowloris connections and a scrape
// still gets its full body; a silent connection is closed at its deadline;
// oversized headers, other paths and methods get their error status.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "cli/exit_codes.h"
#include "dataplane/stats.h"
#include "doc_section.h"
#include "engine_fixture.h"
#include "http_client.h"
#include "ipc/protocol.h"
#include "metrics_scrape.h"
#include "netns.h"
#include "npf/client.h"
#include "npf/counters.h"
#include "npf/version.h"
#include "npfd_rig.h"
#include "region/region_stats.h"
#include "wait.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

// npfd's per-flow families (one series per open client flow and status or reason).
const std::vector<std::string> kFlowFamilies = {"npf_flow_completed_total", "npf_flow_dropped_total",
                                                "npf_flow_passed_total", "npf_flow_credits_total"};
const std::vector<std::string> kDropReasons = {"drop_rnr",   "drop_bad_desc", "drop_contended",
                                               "drop_csum",  "redir_fail",    "socket"};
const std::vector<std::string> kPassReasons = {"pass_bad_queue", "pass_no_socket", "pass_too_big", "pass_meta_fail"};

// The naming rule, spelled out here once more on purpose (docs/cli.md):
// npf_<name>, _total unless a gauge; XDP counters npf_xdp_<name>_total
// (rx_total keeps one _total); latencies npf_latency_<name>_seconds.
std::string counterName(const CounterDef<EngineStats>& c)
{
    return std::string("npf_") + c.name + (c.gauge ? "" : "_total");
}
std::string regionName(const CounterDef<RegionStats>& c) { return std::string("npf_region_") + c.name + "_total"; }
std::string xdpName(const std::string& n)
{
    return "npf_xdp_" + n + (n.ends_with("_total") ? "" : "_total");
}
std::string latencyName(const LatencyDef& l) { return std::string("npf_latency_") + l.name + "_seconds"; }

// ---- docs ------------------------------------------------------------------------

std::string expectedDocNames()
{
    std::ostringstream out;
    auto row = [&](const std::string& name, const char* type) { out << std::left << std::setw(44) << name + " " << type << "\n"; };
    for (const auto& c : kEngineCounters)
        row(counterName(c), c.gauge ? "gauge" : "counter");
    for (const auto& c : kRegionCounters)
        row(regionName(c), "counter");
    for (const char* n : dataplane::kStatNames)
        row(xdpName(n), "counter");
    for (const LatencyDef& l : kEngineLatencies)
        row(latencyName(l), "summary");
    row("npf_clients", "gauge");
    row("npf_pods", "gauge");
    row("npf_build_info", "gauge");
    for (const std::string& f : kFlowFamilies)
        row(f, "counter");
    return out.str();
}

// The lines of the fenced blocks of docs/cli.md's "## Counters" section.
std::string docNames()
{
    std::string out;
    bool inFence = false;
    for (const std::string& line : test::docSection(NPF_CLI_MD, "## Counters")) {
        if (line.rfind("```", 0) == 0)
            inFence = !inFence;
        else if (inFence)
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

using test::Clock;
using test::HttpReply;
using test::msUntil;

class NpfdMetrics : public EngineE2E {
protected:
    // npfd serving a fresh rig's interface, its exporter on a free port of
    // the rx namespace.
    struct Exporter {
        Exporter() : mport(freePort(rig)), npfd(rig, dir, {"--metrics", "127.0.0.1:" + std::to_string(mport)}) {}
        Rig rig;
        TempDir dir;
        const uint16_t mport;
        Npfd npfd;
    };
    // Made on the first call (after SetUp checked for root), kept until the test ends.
    Exporter& exporter()
    {
        if (!exporter_)
            exporter_ = std::make_unique<Exporter>();
        return *exporter_;
    }

private:
    std::unique_ptr<Exporter> exporter_;
};

size_t expectedNpfFamilies()
{
    // The tables' families, + npf_clients, npf_pods, npf_build_info and the per-flow ones.
    return kEngineCounters.size() + kRegionCounters.size() + std::size(dataplane::kStatNames) +
           kEngineLatencies.size() + 3 + kFlowFamilies.size();
}
size_t npfFamilies(const Scrape& s)
{
    size_t n = 0;
    for (const auto& [name, type] : s.type)
        n += name.rfind("npf_", 0) == 0 && s.help.count(name);
    return n;
}

TEST_F(NpfdMetrics, ScrapeHasEveryTableEntryAndCountsWhatWasSent)
{
    auto& [rig, dir, mport, npfd] = exporter();
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
    for (const auto& c : kRegionCounters) {
        expectFamily(before, regionName(c), "counter");
        EXPECT_TRUE(before.has(series(regionName(c)))) << c.name;
    }
    for (size_t i = 0; i < std::size(dataplane::kStatNames); i++) {
        const std::string n = xdpName(dataplane::kStatNames[i]);
        expectFamily(before, n, "counter");
        EXPECT_TRUE(before.has(series(n))) << n;
        EXPECT_NE(before.help.count(n) ? before.help.at(n).find(dataplane::kStatHelp[i]) : std::string::npos,
                  std::string::npos)
            << n << ": help from NPF_STATS";
    }
    for (const LatencyDef& l : kEngineLatencies) {
        const std::string n = latencyName(l);
        expectFamily(before, n, "summary");
        for (const char* q : {"0.5", "0.99", "0.999"})
            EXPECT_TRUE(before.has(quantile(n, q))) << n << " quantile " << q;
        EXPECT_TRUE(before.has(series(n + "_count"))) << n;
    }
    // No npf_ family but the tables' (the exporter adds prometheus-cpp's
    // exposer_* ones about itself, as its Exposer did).
    EXPECT_EQ(npfFamilies(before), expectedNpfFamilies());
    expectFamily(before, "npf_clients", "gauge");
    for (const std::string& f : kFlowFamilies)
        expectFamily(before, f, "counter");
    EXPECT_EQ(before.at("npf_clients"), 0);
    expectFamily(before, "npf_build_info", "gauge");
    const std::string info = "npf_build_info{version=\"" NPF_VERSION_STRING "\",abi=\"" +
                             std::to_string(NPF_ABI_VERSION) + "\",protocol=\"" +
                             std::to_string(ipc::kProtocolVersion) + "\",oldest_protocol=\"" +
                             std::to_string(ipc::kOldestProtocol) + "\"}";
    EXPECT_EQ(before.at(info), 1) << info;
    expectFamily(before, "exposer_scrapes_total", "counter");
    expectFamily(before, "exposer_transferred_bytes_total", "counter");
    expectFamily(before, "exposer_request_latencies", "summary");

    constexpr uint32_t kN = 64;
    const uint16_t port = kFirstPort + 60;
    {
        Client cli({.socket = npfd.socket(), .regionSize = 4 << 20, .name = "metrics"});
        Flow& f = cli.openFlow(port);
        for (uint32_t i = 0; i < kN; i++)
            ASSERT_TRUE(f.post(i * 4096, 2048));
        f.flush();
        ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 3, .count = kN, .dstPort = port,
                                             .size = [](uint32_t) { return 900u; }}), "");
        npf_completion c[kN];
        ASSERT_EQ(awaitCompletions(f, c), kN) << npfd.log();
        // While it is connected: its flow's series, by status.
        const Scrape during = parse(httpGet(rig, mport));
        const std::string labels = "{iface=\"" + rig.rxIf() + "\",port=\"" + std::to_string(port) +
                                   "\",client=\"metrics\",uid=\"0\",";
        const std::string flow = "npf_flow_completed_total" + labels + "status=\"";
        EXPECT_EQ(during.at(flow + "ok\"}"), kN);
        for (const char* st : {"truncated", "lost", "bad_csum"})
            EXPECT_EQ(during.at(flow + st + "\"}"), 0) << st;
        // Nothing of it dropped or passed: a series per reason, each 0.
        for (const std::string& r : kDropReasons)
            EXPECT_EQ(during.at("npf_flow_dropped_total" + labels + "reason=\"" + r + "\"}"), 0) << r;
        for (const std::string& r : kPassReasons)
            EXPECT_EQ(during.at("npf_flow_passed_total" + labels + "reason=\"" + r + "\"}"), 0) << r;
        // And through npfd, the flow's own accounting says the same.
        const FlowStats fs = f.stats();
        EXPECT_EQ(fs.reached(), kN);
        EXPECT_EQ(fs.claimed(), kN);
        EXPECT_EQ(fs.completedOk, kN);
        EXPECT_EQ(fs.inFlight, 0u);
        EXPECT_EQ(during.at("npf_clients"), 1);
        // The client reads a page it never posted: a fault on its own
        // mapping, served through its userfaultfd, is one of the node's.
        const uint64_t own = cli.stats().cpuFaults;
        EXPECT_EQ(cli.region()[3 << 20], 0);
        EXPECT_GT(cli.stats().cpuFaults, own);
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
    // Its flow's series went with it.
    for (const auto& [key, v] : after.series)
        EXPECT_EQ(key.find("port=\"" + std::to_string(port) + "\""), std::string::npos) << key;
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
    for (const auto& c : kRegionCounters)
        EXPECT_GE(delta(regionName(c)), 0) << c.name;
    for (const char* x : dataplane::kStatNames)
        EXPECT_GE(delta(xdpName(x)), 0) << x;
    // The client's own fault, with it gone: in the totals still.
    EXPECT_GE(delta("npf_region_client_faults_total"), 1);
    EXPECT_GE(delta("npf_cpu_faults_total"), delta("npf_region_client_faults_total"));
    // Every fault-path datagram is timed, a fast-path one only if its seq is
    // a multiple of NPF_FAST_STAMP_EVERY (abi.h): of seqs 0 .. kN-1, at least
    // kN / NPF_FAST_STAMP_EVERY either way.
    EXPECT_GE(delta(latencyName(kEngineLatencies[4]) + "_count") + delta(latencyName(kEngineLatencies[5]) + "_count"),
              kN / NPF_FAST_STAMP_EVERY)
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
        EXPECT_EQ(exitOf(bad), cli::kExitUsage) << bad;

    uint16_t port = 0;
    const Fd taken = loopbackSocket(rig, &port);
    ASSERT_EQ(::listen(taken.get(), 1), 0);
    const int st = exitOf("127.0.0.1:" + std::to_string(port));
    EXPECT_NE(st, 0);
    EXPECT_NE(st, -1) << "npfd did not exit";
}

// ---- hostile peers ------------------------------------------------------------------

// The families of every table and npfd's own two, each with HELP and TYPE.
// Slowloris: connections that each sent part of a request line and then one
// byte now and then, never finishing it. A scrape among them still gets the
// whole body, and npfd closes every one of them however steadily it
// trickles (a deadline for the whole request, not per read).
TEST_F(NpfdMetrics, SlowConnectionsDoNotStarveAScrape)
{
    auto& [rig, dir, mport, npfd] = exporter();
    ASSERT_NE(httpGet(rig, mport), "") << npfd.log();

    // Each connects without waiting for npfd to accept it (an exporter that
    // stops accepting leaves them in its backlog, or their SYNs unanswered,
    // which is part of the attack), sends "GET /metr" once connected, then
    // one more byte of the path twice a second until the test ends (errors
    // ignored: npfd closes them).
    constexpr size_t kSlow = 256;
    struct Slow {
        Fd fd;
        bool started = false;
    };
    std::vector<Slow> slow(kSlow);
    {
        test::NetnsGuard in(rig.veth().rxNs());
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(mport);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (Slow& c : slow) {
            c.fd = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
            ASSERT_TRUE(c.fd) << std::strerror(errno);
            ASSERT_TRUE(::connect(c.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 || errno == EINPROGRESS)
                << std::strerror(errno);
        }
    }
    auto trickleOnce = [&] {
        for (Slow& c : slow)
            if (!c.started)
                c.started = ::send(c.fd.get(), "GET /metr", 9, MSG_NOSIGNAL | MSG_DONTWAIT) == 9;
            else
                (void)::send(c.fd.get(), "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    };
    // Connected (writable), or refused; the deadline only bounds an exporter
    // that never completes them.
    const auto setupEnd = Clock::now() + test::kDeadline;
    for (Slow& c : slow)
        (void)test::waitFor(c.fd.get(), POLLOUT, setupEnd);
    trickleOnce();
    size_t started = 0;
    for (const Slow& c : slow)
        started += c.started;
    std::cout << started << " of " << kSlow << " slow connections connected and sent \"GET /metr\"\n";
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    std::thread trickle([&] {
        std::unique_lock<std::mutex> lock(mu);
        while (!cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return stop; }))
            trickleOnce();
    });
    struct Joiner {
        std::mutex& mu;
        std::condition_variable& cv;
        bool& stop;
        std::thread& t;
        ~Joiner()
        {
            {
                std::lock_guard<std::mutex> lock(mu);
                stop = true;
            }
            cv.notify_all();
            t.join();
        }
    } joiner{mu, cv, stop, trickle};

    const auto t0 = Clock::now();
    const HttpReply r = httpExchange(rig, mport, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    std::cout << "scrape with " << kSlow << " slow connections open: " << took.count() << " ms, status "
              << r.status << " " << r.error << "\n";
    ASSERT_EQ(r.status, 200) << r.error << "\n" << npfd.log();
    const Scrape s = parse(r.body);
    EXPECT_TRUE(s.errors.empty()) << ::testing::PrintToString(s.errors);
    EXPECT_EQ(npfFamilies(s), expectedNpfFamilies()) << r.body;
    EXPECT_TRUE(s.has("npf_clients"));

    // Every slow connection is closed by npfd (EOF, or a reset when it
    // had unread bytes), trickle or not.
    size_t open = kSlow;
    std::vector<bool> closed(kSlow, false);
    const auto closeEnd = Clock::now() + test::kDeadline;
    while (open > 0 && Clock::now() < closeEnd) {
        std::vector<pollfd> p;
        std::vector<size_t> which;
        for (size_t i = 0; i < kSlow; i++)
            if (!closed[i]) {
                p.push_back({slow[i].fd.get(), POLLIN, 0});
                which.push_back(i);
            }
        if (::poll(p.data(), p.size(), msUntil(closeEnd)) <= 0)
            continue;
        for (size_t k = 0; k < p.size(); k++) {
            if (!p[k].revents)
                continue;
            char buf[4096];
            const ssize_t n = ::recv(p[k].fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                closed[which[k]] = true;
                open--;
            }
        }
    }
    const auto allClosed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    std::cout << kSlow - open << " of " << kSlow << " slow connections closed by npfd after " << allClosed.count()
              << " ms\n";
    EXPECT_EQ(open, 0u) << "slow connections npfd left open";
    // And it still serves.
    EXPECT_NE(httpGet(rig, mport), "") << npfd.log();
}

// A connection that sends nothing is closed at its deadline (read returns
// 0); headers too large, another path, another method get their status.
TEST_F(NpfdMetrics, BadRequestsGetAnErrorAndSilentConnectionsAreClosed)
{
    auto& [rig, dir, mport, npfd] = exporter();
    ASSERT_NE(httpGet(rig, mport), "") << npfd.log();

    {
        const auto t0 = Clock::now();
        const auto end = t0 + test::kDeadline;
        const Fd silent = connectLoopback(rig, mport, end);
        ASSERT_TRUE(silent);
        bool closed = false;
        const std::string got = test::readUntilClose(silent.get(), end, &closed);
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
        std::cout << "a silent connection was closed after " << took.count() << " ms\n";
        EXPECT_TRUE(closed) << "npfd did not close a connection that sent nothing (" << took.count() << " ms)";
        EXPECT_EQ(got, "") << "it said something to a connection that asked nothing";
    }
    {
        const std::string big = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(32 << 10, 'a') +
                                "\r\n\r\n";
        const HttpReply r = httpExchange(rig, mport, big);
        EXPECT_TRUE(r.status >= 400 && r.status < 500) << r.status << " " << r.error << "\n" << r.head;
    }
    {
        const HttpReply r = httpExchange(rig, mport, "GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n");
        EXPECT_EQ(r.status, 404) << r.error << "\n" << r.head;
    }
    {
        const HttpReply r = httpExchange(rig, mport, "POST /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
        EXPECT_EQ(r.status, 405) << r.error << "\n" << r.head;
    }
    EXPECT_NE(httpGet(rig, mport), "") << npfd.log();
}

} // namespace
} // namespace npf::e2e
