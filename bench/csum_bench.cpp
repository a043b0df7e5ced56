// Cost of verifying UDP checksums in the copy npf makes anyway: memcpy vs
// csumCopy (copy + sum) vs csumPartial (sum only, the pager's check), per
// datagram size, into a warm buffer and into a 64 MiB region walked like a
// receive pool (cold destination lines, as the fast path sees them).
// Each is timed in kTrials alternating trials (drift on a shared machine hits
// all three alike); the table shows medians, ratio = median of the trials'
// csumCopy / memcpy.
// Usage: npf-csum-bench [iterations]   Prints a table, then one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/version.h"
#include "sys/csum.h"

namespace {

using Clock = std::chrono::steady_clock;

volatile uint64_t g_sink; // keeps the sums alive

template <typename F>
double nsPerCall(uint64_t iters, F&& f)
{
    const auto t0 = Clock::now();
    for (uint64_t i = 0; i < iters; i++)
        f(i);
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

constexpr int kTrials = 5;

} // namespace

int main(int argc, char** argv)
{
    if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
        std::puts(npf::cli::versionLine("npf-csum-bench").c_str());
        return 0;
    }
    const uint64_t iters = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
    constexpr size_t kPool = 64u << 20, kStride = 9216;
    std::vector<uint8_t> src(kStride), pool(kPool);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = uint8_t(i * 31 + 7);
    std::memset(pool.data(), 0, pool.size()); // resident before timing
    nlohmann::ordered_json rows = nlohmann::json::array();
    std::printf("%-7s %-5s %10s %10s %10s %8s\n", "bytes", "dest", "memcpy ns", "csumCopy", "csumOnly", "ratio");
    for (size_t len : {64u, 512u, 1472u, 8972u}) {
        for (bool cold : {false, true}) {
            auto dst = [&](uint64_t i) { return pool.data() + (cold ? (i * kStride) % (kPool - kStride) : 0); };
            uint64_t sum = 0;
            std::vector<double> copies, boths, onlys, ratios;
            for (int t = 0; t < kTrials; t++) {
                const uint64_t n = iters / kTrials, base = uint64_t(t) * n; // each trial on fresh pool lines
                const double copy = nsPerCall(n, [&](uint64_t i) {
                    std::memcpy(dst(base + i), src.data(), len);
                    asm volatile("" ::: "memory");
                });
                const double both =
                    nsPerCall(n, [&](uint64_t i) { sum += npf::csumCopy(dst(base + i), src.data(), len); });
                const double only = nsPerCall(n, [&](uint64_t) { sum += npf::csumPartial(src.data(), len); });
                copies.push_back(copy);
                boths.push_back(both);
                onlys.push_back(only);
                ratios.push_back(both / copy);
            }
            g_sink = sum;
            const double copy = median(copies), both = median(boths), only = median(onlys), ratio = median(ratios);
            std::printf("%-7zu %-5s %10.1f %10.1f %10.1f %7.2fx\n", len, cold ? "cold" : "warm", copy, both, only,
                        ratio);
            rows.push_back({{"bytes", len},         {"dest", cold ? "cold" : "warm"}, {"memcpy_ns", copy},
                            {"csum_copy_ns", both}, {"csum_only_ns", only},            {"ratio", ratio}});
        }
    }
    const nlohmann::ordered_json out{{"bench", "csum"}, {"iterations", iters}, {"trials", kTrials}, {"rows", rows}};
    std::printf("%s\n", out.dump().c_str());
}
