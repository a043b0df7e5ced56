// The scenarios of the benchmark (issue 4): each runs its contenders side by
// side against the same traffic, prints a human table and returns JSON.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace npf::bench {

struct Options {
    bool quick = false;
    std::vector<std::string> scenarios; // empty = all
    std::vector<std::string> only;      // contenders to run (empty = each scenario's own list)
    double seconds = 2.0;               // sending time per contender
    double coldRate = 1.0e6;            // offered pps in cold/pressure scenarios
    uint32_t payload = 1472;
    uint64_t region = 64ull << 20;
    std::vector<int> genCpus{0}, rxCpus{1};
    uint32_t flows = 1;
    std::string sender = "live";
    std::string npfd;                   // npfd binary for npf-sidecar ("" = the build's)
    uint64_t releaseMin = 0;            // npf, npf-sidecar: bytes consumed before a release (0 = every batch)
    uint32_t pagers = 1;                // npf, npf-2m: pager threads (EngineConfig::pagerThreads)
    bool udpCsum = true;                // generated datagrams carry correct UDP checksums (else 0)
    // This run's steady state, by contender: received pps and CPU ns per
    // datagram (static-pinned's CPU is the control the other scenarios
    // check; the reserved fault path is held against both).
    struct Steady {
        double pps = 0, cpuNs = 0;
    };
    std::map<std::string, Steady> steady;
    // `kind`'s steady state in this run; zeros if it did not run there.
    Steady steadyOf(const std::string& kind) const
    {
        const auto it = steady.find(kind);
        return it == steady.end() ? Steady{} : it->second;
    }
    // The 4 KiB install bound of this run's start (PageRates::touchedPerSec:
    // recycled pages, each read once by the receiver); 0: not measured.
    double installBoundPerSec = 0;
    std::string outDir = "bench-results";
    bool verbose = false;
};

using Json = nlohmann::ordered_json;

const std::vector<std::string>& scenarioNames();
Json runScenario(const std::string& name, const Options& o);
// Every contender's received pps and CPU per datagram in a steady scenario's JSON.
std::map<std::string, Options::Steady> steadyRuns(const Json& steady);

} // namespace npf::bench
