// Runs `npf-bench --quick` for real (namespaces, XDP, AF_XDP, userfaultfd,
// an npfd for npf-sidecar) and checks that it exits 0 and that its JSON
// parses and holds every scenario with results from the contenders.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "netns.h"

namespace {

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
    for (const char* s : {"steady", "cold", "pressure", "faultpath", "stages", "scaling", "csum"})
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
    // npf-sidecar ran through a real npfd wherever npf runs, and left neither
    // the npfd it started nor its directory (config, socket, log) behind.
    for (const char* s : {"steady", "cold", "pressure", "faultpath"}) {
        const nlohmann::json* run = nullptr;
        for (const auto& r : j["scenarios"][s]["runs"])
            if (r["contender"] == "npf-sidecar")
                run = &r;
        ASSERT_NE(run, nullptr) << s << ": no npf-sidecar run";
        EXPECT_FALSE(run->contains("error")) << run->dump();
        EXPECT_GT((*run)["received"].get<uint64_t>(), 0u) << s;
        const auto& npfd = (*run)["details"]["npfd"];
        ASSERT_TRUE(npfd.contains("pid") && npfd.contains("dir")) << run->dump();
        EXPECT_TRUE(::kill(npfd["pid"].get<pid_t>(), 0) != 0 && errno == ESRCH) << s << ": npfd still running";
        EXPECT_FALSE(std::filesystem::exists(npfd["dir"].get<std::string>())) << s << ": " << npfd["dir"];
    }
    for (const char* s : {"steady", "faultpath"})
        EXPECT_TRUE(j["scenarios"][s].contains("sidecarVsNpf")) << s;
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".log");
}

} // namespace
