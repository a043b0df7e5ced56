// Runs `npf-xdp-bench` for real with a tiny count (1 and 32 flows, 2 calls of
// 100 runs, this build's npf_xdp object as --baseline) and checks that it
// exits 0, that its JSON has every configuration with a positive time and the
// expected verdict and outcome counter, the steered ones a ratio over their
// baseline twin, and that it left no network namespace behind.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "netns.h"

namespace {

TEST(XdpBenchSmoke, TinyRunWritesJson)
{
    if (!npf::test::isRoot())
        GTEST_SKIP() << "npf-xdp-bench needs root (BPF, AF_XDP, network namespaces)";
    const std::string base = "/tmp/npf-xdp-bench-smoke-" + std::to_string(getpid());
    // Spawned (not system()) to know its pid: the bench's namespaces carry
    // it in their names ("<prefix><pid % 100000>x<n>"), so this checks its
    // own namespaces only, not those of tests running beside it.
    const std::string json = base + ".json", logPath = base + ".log";
    std::vector<std::string> args = {NPF_XDP_BENCH_BIN, "--flows", "1,32", "--calls", "2", "--repeat", "100",
                                     "--rounds", "1", "--baseline", NPF_XDP_OBJ, "--json", json};
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0) << argv[0];
    posix_spawn_file_actions_destroy(&fa);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    std::ifstream log(logPath);
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << text;
    const std::string mark = std::to_string(pid % 100000) + "x";
    std::istringstream names(npf::test::shOut("ip netns list"));
    for (std::string line; std::getline(names, line);)
        EXPECT_EQ(line.find(mark), std::string::npos) << "network namespace left behind: " << line;

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
