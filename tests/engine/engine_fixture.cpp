#include "engine_fixture.h"

#include <cstdio>
#include <cstdlib>

namespace npf::e2e {

double rate()
{
    const char* env = std::getenv("NPF_E2E_RATE");
    return env ? std::atof(env) : 40000;
}

EngineInNs::EngineInNs(Rig& rig, EngineConfig cfg) : rig_(rig)
{
    test::NetnsGuard in(rig_.veth().rxNs());
    cfg.ifname = rig_.rxIf();
    eng_ = std::make_unique<Engine>(cfg);
}

EngineInNs::~EngineInNs()
{
    test::NetnsGuard in(rig_.veth().rxNs());
    eng_.reset();
}

::testing::AssertionResult accounted(Rig& rig, const Counters& xdpBefore, uint64_t vethDropsBefore, uint64_t sent,
                                     const CheckTotals& t, const EngineStats& s)
{
    Counters d = delta(rig.xdp(), xdpBefore);
    uint64_t veth = rig.vethDrops() - vethDropsBefore;
    // Native XDP on veth also counts a datagram the AF_XDP socket dropped
    // (kernel_rx_dropped) in the veth's rx drops: only the rest fell before XDP.
    if (d["rx_total"] + veth != sent && veth >= s.kernelRxDropped)
        veth -= s.kernelRxDropped;
    uint64_t passed = 0, dropped = d["drop_rnr"] + d["drop_contended"] + d["drop_bad_desc"] + d["drop_csum"];
    for (const auto& [name, v] : d)
        if (name.rfind("pass_", 0) == 0)
            passed += v;
    const uint64_t claimed = d["redir_primary"] + d["redir_backup"] + d["redir_fail"];
    const uint64_t lossCounted = d["redir_fail"] + s.kernelRxDropped + s.mismatch + s.placeErrors + s.badMeta;
    auto failure = [&]() {
        return ::testing::AssertionFailure()
               << "\n  sent " << sent << ", completions " << t.completions << " (ok " << t.ok << ", truncated "
               << t.truncated << ", lost " << t.lost << ", bad csum " << t.badCsum << "), veth drops " << veth << "\n  xdp: " << describe(d)
               << "\n  engine: kernel_rx_dropped " << s.kernelRxDropped << " mismatch " << s.mismatch
               << " place_errors " << s.placeErrors << " bad_meta " << s.badMeta << " rejected " << s.rejected
               << " completed ok/trunc/lost " << s.completedOk << "/" << s.completedTruncated << "/"
               << s.completedLost << "\n  ";
    };
    if (d["rx_total"] + veth != sent)
        return failure() << "XDP saw " << d["rx_total"] << " packets + " << veth << " veth drops != " << sent << " sent";
    if (claimed != t.completions)
        return failure() << "XDP claimed " << claimed << " posted buffers, the application saw " << t.completions
                         << " completions";
    if (t.ok + t.truncated + t.lost + t.badCsum + dropped + passed + veth != sent)
        return failure() << "completions + XDP drops " << dropped << " + passes " << passed
                         << " + veth drops do not add up to the datagrams sent";
    if (t.lost != lossCounted)
        return failure() << t.lost << " LOST completions, but the loss counters explain " << lossCounted;
    if (t.badCsum != s.csumErrors)
        return failure() << t.badCsum << " BAD_CSUM completions, but csum_errors is " << s.csumErrors;
    if (s.completedOk != t.ok || s.completedTruncated != t.truncated || s.completedLost != t.lost ||
        s.completedBadCsum != t.badCsum)
        return failure() << "EngineStats completion counters disagree with the completions polled";
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult flowAccounted(const FlowStats& f, const CheckTotals& polled, uint64_t reached)
{
    auto failure = [&]() {
        return ::testing::AssertionFailure()
               << "\n  flow: reached " << f.reached() << " (passed " << f.passed() << ", dropped in XDP "
               << f.droppedInXdp() << ", claimed " << f.claimed() << "), completed ok/trunc/bad_csum/lost "
               << f.completedOk << "/" << f.completedTruncated << "/" << f.completedBadCsum << "/" << f.completedLost
               << ", in flight " << f.inFlight << "\n  polled ok/trunc/bad_csum/lost " << polled.ok << "/"
               << polled.truncated << "/" << polled.badCsum << "/" << polled.lost << "\n  ";
    };
    if (f.reached() != f.passed() + f.droppedInXdp() + f.claimed() || f.claimed() != f.completed() + f.inFlight)
        return failure() << "the identity does not hold";
    if (f.inFlight != 0)
        return failure() << "still in flight";
    if (f.completedOk != polled.ok || f.completedTruncated != polled.truncated || f.completedLost != polled.lost ||
        f.completedBadCsum != polled.badCsum)
        return failure() << "the flow's completions are not the ones the application polled";
    if (f.reached() != reached)
        return failure() << "want " << reached << " datagrams reached XDP";
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult cleanInOrder(const Checker& chk)
{
    const CheckTotals& t = chk.totals();
    if (t.failures)
        return ::testing::AssertionFailure() << t.failures << " completions failed their check:\n" << t.firstFailures;
    if (t.lost)
        return ::testing::AssertionFailure() << t.lost << " completions LOST";
    return chk.inSendOrder();
}

namespace {

SendPlan underFlowControl(SendPlan plan, const Checker& chk)
{
    if (plan.window == 0) {
        plan.window = chk.window();
        plan.done = chk.done();
    }
    return plan;
}

} // namespace

Stream::Stream(Rig& rig, Checker& chk, SendPlan plan)
    : rig_(rig),
      chk_(chk),
      count_(plan.count),
      xdp0_(rig.xdp()),
      veth0_(rig.vethDrops()),
      tx_(rig.veth(), underFlowControl(plan, chk))
{
}

std::string Stream::run(uint64_t until, size_t lag)
{
    tx_.start();
    chk_.pumpUntil(until ? until : count_, lag);
    tx_.join();
    return tx_.error();
}

::testing::AssertionResult Stream::accounted(const EngineStats& s, uint64_t alsoSent)
{
    return e2e::accounted(rig_, xdp0_, veth0_, alsoSent + tx_.sent(), chk_.totals(), s);
}

Baseline baseline(Rig& rig, Engine& eng) { return {eng.xdpCounters(), rig.vethDrops(), eng.stats().kernelRxDropped}; }

std::function<bool()> allAccounted(Rig& rig, Engine& eng, const Checker& chk, Baseline b,
                                   std::function<uint64_t()> sent)
{
    const uint64_t completions0 = chk.totals().completions;
    return [&rig, &eng, &chk, b, sent, completions0] {
        const auto x = eng.xdpCounters();
        auto d = [&](npf_stat i) { return x[i] - b.xdp[i]; };
        const uint64_t claimed = d(NPF_STAT_REDIR_PRIMARY) + d(NPF_STAT_REDIR_BACKUP) + d(NPF_STAT_REDIR_FAIL);
        if (chk.totals().completions - completions0 != claimed)
            return false;
        // Native XDP on veth counts an AF_XDP socket's drops in the veth's rx
        // drops too (see accounted()): only the rest fell before XDP.
        const uint64_t veth = rig.vethDrops() - b.vethDrops, xsk = eng.stats().kernelRxDropped - b.kernelRxDropped;
        return d(NPF_STAT_RX_TOTAL) + (veth >= xsk ? veth - xsk : veth) == sent();
    };
}

std::string numbers(const EngineStats& s)
{
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "fast %llu, fault %llu (deferred %llu), packet faults %llu, cpu faults %llu, prefetched %llu, "
                  "evicted %llu, restored %llu; fault latency p50 %.1f us p99 %.1f us; fast latency p50 %.1f us "
                  "p99 %.1f us",
                  (unsigned long long)s.fastPath, (unsigned long long)s.faultPath, (unsigned long long)s.deferred,
                  (unsigned long long)s.packetFaults, (unsigned long long)s.cpuFaults,
                  (unsigned long long)s.prefetched, (unsigned long long)s.evicted, (unsigned long long)s.restored,
                  s.faultTotal.p50 / 1e3, s.faultTotal.p99 / 1e3, s.fastTotal.p50 / 1e3, s.fastTotal.p99 / 1e3);
    return buf;
}

} // namespace npf::e2e
