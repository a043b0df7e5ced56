// Shared pieces of the engine end-to-end tests: the root check, an engine
// built (and torn down) inside the rx namespace, and the accounting check
// "every datagram sent is completed or counted".
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "checker.h"
#include "e2e_rig.h"
#include "npf/engine.h"

namespace npf::e2e {

// Sender rate, datagrams/s: 40000 gave zero loss with margin on the 2-vCPU VM;
// NPF_E2E_RATE overrides it (0 = flat out) to measure where loss begins.
double rate();

class EngineE2E : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!test::isRoot())
            GTEST_SKIP() << "needs root: netns, veth, XDP, AF_XDP and userfaultfd";
    }
};

// Constructs and destroys the engine in the rx namespace: the engine resolves
// (and, if it attached, detaches) the interface by name in the caller's netns.
class EngineInNs {
public:
    EngineInNs(Rig& rig, EngineConfig cfg);
    ~EngineInNs();
    Engine& operator*() { return *eng_; }
    Engine* operator->() { return eng_.get(); }

private:
    Rig& rig_;
    std::unique_ptr<Engine> eng_;
};

// sent == completed OK/TRUNCATED + LOST + XDP drops/passes + veth drops;
// XDP redirects == completions; LOST == the engine's loss counters.
::testing::AssertionResult accounted(Rig& rig, const Counters& xdpBefore, uint64_t vethDropsBefore, uint64_t sent,
                                     const CheckTotals& t, const EngineStats& s);

// "fast=.. fault=.. lat p50/p99" line for the report.
std::string numbers(const EngineStats& s);

} // namespace npf::e2e
