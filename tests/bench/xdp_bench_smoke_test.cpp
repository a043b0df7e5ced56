// Runs `npf-xdp-bench` for real with a tiny count (1 and 32 flows, 2 calls of
// 100 runs, this build's npf_xdp object as --baseline) and checks that it
// exits 0, that its JSON has every configuration with a positive time and the
// expected verdict and outcome counter, the steered ones a ratio over their
// baseline twin, and that it left no network namespace behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "netns.h"

namespace {

TEST(XdpBenchSmoke, TinyRunWritesJson)
{
    if (!npf::test::isRoot())
        GTEST_SKIP() << "npf-xdp-bench needs root (BPF, AF_XDP, network namespaces)";
    const std::string base = "/tmp/npf-xdp-bench-smoke-" + std::to_string(getpid());
    const std::string nsBefore = npf::test::shOut("ip netns list");
    const std::string cmd = std::string(NPF_XDP_BENCH_BIN) + " --flows 1,32 --calls 2 --repeat 100 --rounds 1 --baseline " +
                            NPF_XDP_OBJ + " --json " + base + ".json > " + base + ".log 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream log(base + ".log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ASSERT_EQ(rc, 0) << text;
    EXPECT_EQ(npf::test::shOut("ip netns list"), nsBefore) << "network namespaces left behind";

    std::ifstream f(base + ".json");
    ASSERT_TRUE(f) << "no JSON written\n" << text;
    const nlohmann::json j = nlohmann::json::parse(f);
    EXPECT_EQ(j["repeat"], 100);
    const std::map<std::string, std::pair<std::string, std::string>> want{
        {"bare XDP_PASS", {"PASS", "-"}},
        {"1 flows, primary", {"REDIRECT", "redir_primary"}},
        {"1 flows, backup", {"REDIRECT", "redir_backup"}},
        {"1 flows, no flow", {"PASS", "pass_no_flow"}},
        {"32 flows, primary", {"REDIRECT", "redir_primary"}},
        {"32 flows, backup", {"REDIRECT", "redir_backup"}},
        {"32 flows, no flow", {"PASS", "pass_no_flow"}},
        {"baseline 1 flows, primary", {"REDIRECT", "redir_primary"}},
        {"baseline 32 flows, backup", {"REDIRECT", "redir_backup"}},
        {"baseline 32 flows, no flow", {"PASS", "pass_no_flow"}},
    };
    std::map<std::string, nlohmann::json> rows;
    for (const auto& r : j["rows"])
        rows[r["config"].get<std::string>()] = r;
    for (const auto& [name, vo] : want) {
        ASSERT_TRUE(rows.count(name)) << name << "\n" << text;
        const auto& r = rows[name];
        EXPECT_GT(r["wallNsMedian"].get<double>(), 0.0) << r.dump();
        EXPECT_EQ(r["ns"].size(), 2u) << r.dump();
        EXPECT_EQ(r["verdict"], vo.first) << r.dump();
        EXPECT_EQ(r["outcome"], vo.second) << r.dump();
        EXPECT_EQ(r["ok"], true) << r.dump();
        if (name.find("flows") != std::string::npos && name.rfind("baseline", 0) != 0) {
            EXPECT_GT(r["overBaseline"].get<double>(), 0.0) << r.dump();
        }
    }
    std::filesystem::remove(base + ".json");
    std::filesystem::remove(base + ".log");
}

} // namespace
