// One npfctl test topology: a fresh veth pair between two namespaces (IPv6
// off, static neighbours, so the only packets are the ones a test sends),
// npfctl run for real inside the rx namespace, and cleanup of whatever npf
// left behind (program, pins) even when the test failed half-way.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "counters.h"
#include "netns.h"
#include "run.h"

namespace npf::itest {

using test::Counters;
using test::delta;

// A path in bpffs a test pins something at, unpinned when it goes.
struct Pin {
    std::string path;
    ~Pin()
    {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
};

// npfctl exit codes (docs/cli.md).
enum Exit { kOk = 0, kRuntime = 1, kUsage = 2, kPermission = 3, kNoIface = 4, kConflict = 5 };

// NpfVeth removes what npf left (program, pins) even when the test failed half-way.
class Rig : public test::NpfVeth {
public:
    explicit Rig(test::VethOptions opt = {});

    // IPv6 could be disabled on both ends: counter deltas are exact.
    bool exactCounts() const { return ipv6Off(); }

    RunResult npfctl(const std::string& args, bool inRx = true);
    RunResult inRx(const std::string& cmd) { return run(veth_.rxNs().exec() + cmd); }
    RunResult inTx(const std::string& cmd) { return run(veth_.txNs().exec() + cmd); }

    // These throw (failing the test) if npfctl/ip exits non-zero or prints bad JSON.
    nlohmann::json status();   // `status IF --json`, the object of rxIf
    Counters counters();       // `stats IF --json`, counters.xdp
    nlohmann::json flows();    // `flow list IF --json`, the flows array
    nlohmann::json link();     // `ip -j link show dev IF` in the rx ns, the one object

    // One datagram from the tx namespace to rxAddr:port by a stock tool.
    // payload: [A-Za-z0-9._-] only (it goes through the shell).
    void socatSend(const std::string& payload, uint16_t port);
    void ncSend(const std::string& payload, uint16_t port);
};


// Checks a counter delta against the packets a test sent: every named counter
// equals its expected value (>= if !exact: the kernel may add packets of its
// own), drops and redirects are 0, and rx_total == the sum of outcomes in
// the absolute counters `now`.
::testing::AssertionResult outcomesMatch(const Counters& d, const Counters& expected, bool exact,
                                         const Counters& now);

} // namespace npf::itest
