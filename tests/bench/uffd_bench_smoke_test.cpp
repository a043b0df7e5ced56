// Runs `npf-uffd-bench` for real on a small region (one trial) and checks that it
// exits 0, that its JSON names every 4 KiB case with a positive rate, the
// install + evict cycles and the page-pool MOVE routes (4 KiB, and 2 MiB THP) with
// every step, or says why MOVE is not there (Linux < 6.8), and that
// vm.nr_hugepages is what it was before (the benchmark reserves and gives back).
// Correctness only: no rate is compared with a threshold (the benchmark itself
// checks the bytes every route installs, and fails when they differ).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
    std::filesystem::remove(base + ".json");
    std::filesystem::remove(base + ".log");
    std::set<std::string> seen, steps2m;
    std::map<std::pair<std::string, int>, int> cycleSteps; // (4 KiB case, pages per call) -> steps
    for (const auto& r : j["rows"]) {
        EXPECT_GT(r["pagesPerSec"].get<double>(), 0.0) << r.dump();
        const std::string c = r["case"].get<std::string>();
        if (r["pageBytes"] == 4096)
            seen.insert(c);
        if (r["pageBytes"] == 4096 && (c.starts_with("cycle-") || c.starts_with("move-")))
            cycleSteps[{c, r["pagesPerCall"].get<int>()}]++;
        if (r["pageBytes"] == 2u << 20 && c == "move-thp")
            steps2m.insert(r["step"].get<std::string>());
    }
    for (const char* c : {"copy", "copy-anon", "zeropage", "punch", "cycle-memfd", "cycle-anon", "wake", "memcpy"})
        EXPECT_TRUE(seen.count(c)) << c << "\n" << text;
    EXPECT_TRUE(j["limits"].contains("4K")) << text;
    EXPECT_TRUE(j["limits"].contains("4K_cycle")) << text;

    // A cycle: write images, install, write + install, evict, the whole cycle.
    std::vector<std::string> cycles{"cycle-memfd", "cycle-anon"};
    if (j["move"]["available"].get<bool>())
        cycles.push_back("move-pool");
    for (const auto& c : cycles)
        for (int n : {1, 16, 64})
            EXPECT_EQ((cycleSteps[{c, n}]), 5) << c << ", " << n << " per call\n" << text;

    if (!j["move"]["available"].get<bool>()) {
        // Older kernel: the MOVE cases are listed, not run, and say why.
        EXPECT_EQ(j["move"]["why"], "UFFDIO_MOVE needs Linux 6.8") << text;
        EXPECT_NE(text.find("n/a: UFFDIO_MOVE needs Linux 6.8"), std::string::npos) << text;
        return;
    }
    // 2 MiB: the THP pool's move, whatever page size the kernel gave it (reported).
    for (const char* s : {"UFFDIO_MOVE pool -> region", "UFFDIO_MOVE region -> pool", "cycle: install + evict"})
        EXPECT_TRUE(steps2m.count(s)) << s << "\n" << text;
    EXPECT_EQ(j["move"]["thpTrials"], 1) << text;
    EXPECT_TRUE(j["move"].contains("pmdMapped")) << text;
    EXPECT_NE(text.find("populated (MADV_POPULATE_WRITE) and registered before the timed window"), std::string::npos)
        << text;
}

} // namespace
