// Runs `npf-uffd-bench` for real on a small region (one trial) and checks that it
// exits 0, that its JSON names every 4 KiB case with a positive rate, and that
// vm.nr_hugepages is what it was before (the benchmark reserves and gives back).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "netns.h"

namespace {

long nrHugepages()
{
    std::ifstream f("/proc/sys/vm/nr_hugepages");
    long v = -1;
    f >> v;
    return v;
}

TEST(UffdBenchSmoke, OneTrialWritesJson)
{
    if (!npf::test::isRoot())
        GTEST_SKIP() << "npf-uffd-bench needs root (userfaultfd on shmem and hugetlbfs, vm.nr_hugepages)";
    const std::string base = "/tmp/npf-uffd-bench-smoke-" + std::to_string(getpid());
    const long hugeBefore = nrHugepages();
    const std::string cmd =
        std::string(NPF_UFFD_BENCH_BIN) + " --trials 1 --mib 4 --json " + base + ".json > " + base + ".log 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream log(base + ".log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ASSERT_EQ(rc, 0) << text;
    EXPECT_EQ(nrHugepages(), hugeBefore) << "nr_hugepages not restored";

    std::ifstream f(base + ".json");
    ASSERT_TRUE(f) << "no JSON written\n" << text;
    const nlohmann::json j = nlohmann::json::parse(f);
    std::set<std::string> seen;
    for (const auto& r : j["rows"]) {
        EXPECT_GT(r["pagesPerSec"].get<double>(), 0.0) << r.dump();
        if (r["pageBytes"] == 4096)
            seen.insert(r["case"].get<std::string>());
    }
    for (const char* c : {"copy", "zeropage", "punch", "wake", "memcpy"})
        EXPECT_TRUE(seen.count(c)) << c << "\n" << text;
    EXPECT_TRUE(j["limits"].contains("4K")) << text;
    std::filesystem::remove(base + ".json");
    std::filesystem::remove(base + ".log");
}

} // namespace
