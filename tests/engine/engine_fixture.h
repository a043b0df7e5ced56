// Shared pieces of the engine end-to-end tests: the root check, an engine
// built (and torn down) inside the rx namespace, and the accounting check
// "every datagram sent is completed or counted".
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "checker.h"
#include "e2e_rig.h"
#include "npf/engine.h"

namespace npf::e2e {

// Pace of the kill soak's senders, datagrams/s (NPF_E2E_RATE, default 40000;
// 0 = flat out). The other tests use flow control (SendPlan::window) instead.
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

// One flow's own accounting (Flow::stats) once it settled: nothing in
// flight, its completions exactly the ones the application polled, the
// identity reached = passed + dropped in XDP + claimed, claimed = completed,
// and `reached` of its datagrams seen by XDP.
::testing::AssertionResult flowAccounted(const FlowStats& f, const CheckTotals& polled, uint64_t reached);

// What a flow-controlled run into one flow must show: no check failed,
// nothing LOST, every sender's datagrams completed in send order.
::testing::AssertionResult cleanInOrder(const Checker& chk);

// One stream of datagrams from the peer into `chk`'s flow, under chk's flow
// control (unless the plan sets SendPlan::window): the XDP and veth counters
// from before it, for accounted().
class Stream {
public:
    Stream(Rig& rig, Checker& chk, SendPlan plan);
    // Sends and pumps until `until` completions (0: the plan's count; lag as
    // Checker::pumpUntil); the sender's error, "" if none.
    std::string run(uint64_t until = 0, size_t lag = 0);
    const Sender& sender() const { return tx_; }
    const Counters& xdpBefore() const { return xdp0_; }
    // accounted() for what this stream sent, plus `alsoSent` datagrams sent otherwise.
    ::testing::AssertionResult accounted(const EngineStats& s, uint64_t alsoSent = 0);

private:
    Rig& rig_;
    Checker& chk_;
    const uint64_t count_;
    const Counters xdp0_;
    const uint64_t veth0_;
    Sender tx_;
};

// Where the counters stood before a test sent: to tell when what it sent is
// accounted for.
struct Baseline {
    std::array<uint64_t, NPF_STAT_MAX> xdp{};
    uint64_t vethDrops = 0;
    uint64_t kernelRxDropped = 0;
};
Baseline baseline(Rig& rig, Engine& eng);

// For Checker::pumpUntilSettled: true once XDP saw every datagram of `sent()`
// (or the veth dropped it before XDP) and every buffer XDP claimed since `b`
// has completed. Then nothing more can complete. One flow on the interface,
// native XDP.
std::function<bool()> allAccounted(Rig& rig, Engine& eng, const Checker& chk, Baseline b,
                                   std::function<uint64_t()> sent);

// "fast=.. fault=.. lat p50/p99" line for the report.
std::string numbers(const EngineStats& s);

} // namespace npf::e2e
