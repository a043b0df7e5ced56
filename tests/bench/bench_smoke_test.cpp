// Runs `npf-bench --quick` for real (namespaces, XDP, AF_XDP, userfaultfd,
// an npfd for npf-sidecar) and checks that it exits 0 and that its JSON
// parses and holds every scenario with results from the contenders, the
// page-allocation rates of the machine, every run's set-up time and CPU per
// datagram, and the control check on ratios against static-pinned (whose
// rule is unit-tested here too).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "control_check.h"
#include "netns.h"

namespace {

using npf::bench::checkControl;
using Verdict = npf::bench::ControlCheck::Verdict;

// The control is starved when its CPU per datagram in a scenario is more than
// twice its steady state's; nothing to check against without a steady state.
TEST(BenchControl, StarvedAboveTwiceItsSteadyCpu)
{
    struct Case {
        double scenarioNs, steadyNs;
        Verdict verdict;
        double ratio;
    } cases[] = {
        {640, 640, Verdict::Ok, 1.0},       {1280, 640, Verdict::Ok, 2.0},   // exactly twice: still a control
        {1281, 640, Verdict::Starved, 1281.0 / 640}, {52000, 640, Verdict::Starved, 52000.0 / 640},
        {300, 640, Verdict::Ok, 300.0 / 640},      {0, 640, Verdict::Starved, 0},  // received nothing
        {900, 0, Verdict::Unchecked, 0},      {0, 0, Verdict::Starved, 0},
    };
    for (const Case& c : cases) {
        const auto got = checkControl(c.scenarioNs, c.steadyNs);
        EXPECT_EQ(got.verdict, c.verdict) << c.scenarioNs << " vs " << c.steadyNs;
        EXPECT_DOUBLE_EQ(got.cpuRatio, c.ratio) << c.scenarioNs << " vs " << c.steadyNs;
    }
    EXPECT_STREQ(checkControl(2000, 640).name(), "starved");
    EXPECT_STREQ(checkControl(700, 640).name(), "ok");
    EXPECT_STREQ(checkControl(700, 0).name(), "unchecked");
}

// The page-allocation probe ran at the start and at the end, and the header said so.
void expectPageRates(const nlohmann::json& j, const std::string& log)
{
    EXPECT_NE(log.find("page allocation now"), std::string::npos) << log;
    EXPECT_NE(log.find("page allocation at the end"), std::string::npos) << log;
    ASSERT_TRUE(j.contains("pageRates")) << j.dump();
    for (const char* when : {"start", "end"}) {
        const auto& p = j["pageRates"][when];
        EXPECT_FALSE(p.contains("error")) << p.dump();
        EXPECT_GT(p["pages"].get<uint64_t>(), 0u) << when;
        EXPECT_GT(p["freshMPagesPerSec"].get<double>(), 0.0) << when;
        EXPECT_GT(p["recycledMPagesPerSec"].get<double>(), 0.0) << when;
    }
}

// Every run says how long its set-up took (outside the window) and what it
// cost per datagram; ratios against static-pinned come with its check.
void expectRunFields(const nlohmann::json& j)
{
    for (const char* s : {"steady", "cold", "pressure", "faultpath", "csum"})
        for (const auto& r : j["scenarios"][s]["runs"]) {
            if (r.contains("error"))
                continue;
            EXPECT_GT(r["setupMs"].get<double>(), 0.0) << s << " " << r["contender"];
            EXPECT_TRUE(r.contains("windowMinorFaults")) << s << " " << r["contender"];
            if (r["received"].get<uint64_t>() > 0) {
                EXPECT_GT(r["rxCpuNsPerPacket"].get<double>(), 0.0) << s << " " << r["contender"];
            }
        }
    for (const char* s : {"cold", "pressure", "faultpath"}) {
        const auto& v = j["scenarios"][s]["vsStaticPinned"];
        ASSERT_TRUE(v.contains("control")) << s << ": " << v.dump();
        const std::string verdict = v["control"]["verdict"];
        EXPECT_TRUE(verdict == "ok" || verdict == "starved") << s << ": " << verdict; // steady ran first
        EXPECT_EQ(v.contains("withheld"), verdict == "starved") << s << ": " << v.dump();
        EXPECT_EQ(v.contains("npf"), verdict == "ok") << s << ": " << v.dump();
    }
}

// The burst: trafgen into npf-recv, each variant once; npf-recv's summary
// accounts for every datagram that reached XDP (written, dropped in XDP or
// completed LOST, nothing in flight or unpolled), names the route, and the
// bound of the moment is there beside it.
void expectBurst(const nlohmann::json& b)
{
    if (b.contains("skipped")) {
        std::printf("[ skipped  ] burst: %s\n", b["skipped"].get<std::string>().c_str());
        return;
    }
    ASSERT_EQ(b["runs"].size(), 6u) << b.dump(); // npf, npf-reserve, npf-2m, npf-2m-noreserve, npfd, npfd-brokered
    for (const auto& r : b["runs"]) {
        ASSERT_FALSE(r.contains("error")) << r.dump();
        EXPECT_GT(r["reached"].get<uint64_t>(), 0u) << r["variant"];
        EXPECT_GT(r["written"].get<uint64_t>(), 0u) << r["variant"];
        EXPECT_EQ(r["otherwiseNotWritten"].get<uint64_t>(), 0u) << r.dump();
        EXPECT_EQ(r["written"].get<uint64_t>() + r["droppedInXdp"].get<uint64_t>() + r["lost"].get<uint64_t>(),
                  r["reached"].get<uint64_t>())
            << r["variant"];
        EXPECT_FALSE(r["route"].get<std::string>().empty()) << r["variant"];
        EXPECT_GT(r["bound"].get<double>(), 0.0) << r["variant"];
        // npf-recv's own summary carries the bound of the moment too (its page rates at start).
        EXPECT_GT(r["summary"]["bound"]["datagrams"].get<double>(), 0.0) << r["summary"].dump();
        EXPECT_LE(r["summary"]["bound"]["datagrams"].get<double>(), r["reached"].get<double>()) << r["variant"];
    }
}

TEST(BenchSmoke, QuickRunWritesJson)
{
    if (!npf::test::isRoot())
        GTEST_SKIP() << "npf-bench needs root (network namespaces, XDP, AF_XDP)";
    const std::string dir = "/tmp/npf-bench-smoke-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    const std::string cmd = std::string(NPF_BENCH_BIN) + " --quick --no-plots -o " + dir + " > " + dir + ".log 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream log(dir + ".log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ASSERT_EQ(rc, 0) << text;

    std::ifstream f(dir + "/npf-bench.json");
    ASSERT_TRUE(f) << "no JSON written\n" << text;
    nlohmann::json j = nlohmann::json::parse(f); // throws (fails the test) if it does not parse
    ASSERT_TRUE(j.contains("scenarios"));
    for (const char* s : {"steady", "cold", "pressure", "faultpath", "stages", "scaling", "csum", "burst"})
        EXPECT_TRUE(j["scenarios"].contains(s)) << s;
    EXPECT_EQ(j["config"]["udpCsum"], true); // correct UDP checksums unless --udp-csum off
    // Every contender of the steady state (and of the checksum on/off runs) received
    // traffic and saw no corrupt payload: npf counts a failed UDP checksum as bad.
    for (const char* s : {"steady", "csum"})
        for (const auto& r : j["scenarios"][s]["runs"]) {
            EXPECT_FALSE(r.contains("error")) << r.dump();
            EXPECT_GT(r["received"].get<uint64_t>(), 0u) << s << " " << r["contender"];
            EXPECT_EQ(r["badPayloads"].get<uint64_t>(), 0u) << s << " " << r["contender"];
        }
    // npf-sidecar (delegated) and npf-sidecar-brokered ran through a real
    // npfd wherever npf runs, in the mode they name, and left neither the
    // npfd they started nor its directory (config, socket, log) behind.
    for (const char* s : {"steady", "cold", "pressure", "faultpath"})
        for (const auto& [contender, mode] : {std::pair{"npf-sidecar", "delegated"}, {"npf-sidecar-brokered", "brokered"}}) {
            const nlohmann::json* run = nullptr;
            for (const auto& r : j["scenarios"][s]["runs"])
                if (r["contender"] == contender)
                    run = &r;
            ASSERT_NE(run, nullptr) << s << ": no " << contender << " run";
            EXPECT_FALSE(run->contains("error")) << run->dump();
            EXPECT_GT((*run)["received"].get<uint64_t>(), 0u) << s << " " << contender;
            const auto& npfd = (*run)["details"]["npfd"];
            ASSERT_TRUE(npfd.contains("pid") && npfd.contains("dir")) << run->dump();
            EXPECT_EQ(npfd.value("mode", ""), mode) << s << " " << contender;
            EXPECT_TRUE(::kill(npfd["pid"].get<pid_t>(), 0) != 0 && errno == ESRCH) << s << ": npfd still running";
            EXPECT_FALSE(std::filesystem::exists(npfd["dir"].get<std::string>())) << s << ": " << npfd["dir"];
        }
    for (const char* s : {"steady", "faultpath"})
        EXPECT_TRUE(j["scenarios"][s].contains("sidecarVsNpf")) << s;
    expectBurst(j["scenarios"]["burst"]);
    expectPageRates(j, text);
    expectRunFields(j);
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".log");
}

} // namespace
