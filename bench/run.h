// One contender against one traffic pattern: start the sender's processes,
// set up the receiver (outside the measured window), send for a while, drain,
// collect everything the report needs.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "generator.h"
#include "meter.h"
#include "receiver.h"
#include "topology.h"

namespace npf::bench {

extern std::atomic<bool> g_interrupted;

// A veth pair between two fresh namespaces; this thread stays in the rx one.
class Env {
public:
    explicit Env(topology::VethOptions opt);
    topology::VethPair& veth() { return veth_; }
    TrafficConfig traffic() const; // addresses, MACs, namespace of the pair
    RxConfig rx() const;

private:
    topology::VethPair veth_;
    topology::NetnsGuard guard_;
};

struct RunSpec {
    std::string kind;         // contender
    std::string sender = "live";
    double seconds = 1.0;     // sending time
    double drainSeconds = 0.1;
};

// What an npf region's page pool did inside the window (the region's
// pool_* counters at its end less those at its start): where the fault
// path's pages came from. Zero for contenders without a pool.
struct PoolWindow {
    uint64_t taken = 0;    // pool_installs: pages moved from the pool into the region
    uint64_t fresh = 0;    // pool_empty: fresh pages allocated into the pool
    uint64_t refills = 0;  // pool_refills: installs that had to allocate first
    uint64_t returned = 0; // pool_returns: evicted pages moved back in
    uint64_t freed = 0;    // pool_full: evicted pages freed instead
};

struct RunResult {
    std::string kind;
    std::string route; // Receiver::route()
    PoolWindow pool;
    bool udpCsum = true;
    uint64_t sent = 0, received = 0, bytes = 0, bad = 0, lostCompletions = 0;
    double seconds = 0, offeredPps = 0, pps = 0, steadyPps = 0;
    double rxCpuSeconds = 0, genCpuSeconds = 0; // rx: every thread of the contender's, in the window
    double setupSeconds = 0;     // the receiver's set-up, before the window (not counted anywhere else)
    uint64_t windowMinorFaults = 0; // minor page faults of this process in the window
    uint64_t pinnedBytes = 0, residentBytes = 0;
    std::vector<uint32_t> bins; // received per 1 ms from the start of sending
    LatencyHistogram latency;
    nlohmann::ordered_json details;
    std::string error;

    uint64_t lost() const { return sent > received ? sent - received : 0; }
    double cpuNsPerPacket() const { return received ? rxCpuSeconds * 1e9 / double(received) : 0.0; }
    nlohmann::ordered_json toJson() const;
};

RunResult runOne(const RunSpec& spec, const TrafficConfig& traffic, const RxConfig& rx, bool verbose);

// Mean of the 1 ms bins in [from, to) (fractions of the sending time).
double meanBins(const std::vector<uint32_t>& bins, size_t from, size_t to);
// First bin from which `bins` stay at >= frac * target for 3 bins; -1 if never.
int timeToFraction(const std::vector<uint32_t>& bins, double target, double frac);

} // namespace npf::bench
