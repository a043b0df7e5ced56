// The engine's counters as one struct (npf::Engine::stats(), npf::Client's
// stats, the JSON snapshot `npfctl stats` reads). Its own header so that the
// counter tables (npf/counters.h) need nothing else of the public API.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "npf/abi.h"

namespace npf {

// Counters of the whole engine. Names, units and help of every field are in
// npf/counters.h (kEngineCounters, kEngineLatencies), the one place that
// defines them: a field added here fails to compile until it is listed there.
struct EngineStats {
    uint64_t fastPath = 0, faultPath = 0, deferred = 0, badMeta = 0, rejected = 0, mismatch = 0;
    uint64_t placeErrors = 0, csumErrors = 0, late = 0, faultDrops = 0, deferDrops = 0;
    uint64_t completedOk = 0, completedTruncated = 0, completedLost = 0, completedBadCsum = 0;
    uint64_t cpuFaults = 0, packetFaults = 0, prefetched = 0, evicted = 0, restored = 0;
    uint64_t residentPages = 0, pinnedBytes = 0; // gauges
    uint64_t kernelRxDropped = 0;
    // Fault-path batches by the datagrams the pager picked up in one.
    uint64_t faultBatches1 = 0, faultBatches2To3 = 0, faultBatches4To7 = 0, faultBatches8To15 = 0,
             faultBatches16To31 = 0, faultBatches32Up = 0;
    // ns from one stage of a datagram to the next: p50/p99/p999/max.
    struct Latency {
        uint64_t count = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
        bool operator==(const Latency&) const = default;
    };
    Latency steerToPickup, pickupToImage, imageToCopy, completeToPublish, faultTotal, fastTotal;
    Latency copyToComplete, faultCompleteToPublish; // fault path, per datagram (kEngineLatencies)
    bool operator==(const EngineStats&) const = default;
};

// A flow's XDP outcomes (npf/abi.h, from NPF_STAT_FLOW_FIRST on) by what
// became of the datagram: the one list of each class, which FlowStats's sums,
// npf-recv, `npfctl flow list` and npfd's metrics all use.
inline constexpr npf_stat kFlowPassed[] = {NPF_STAT_PASS_BAD_QUEUE, NPF_STAT_PASS_NO_SOCKET, NPF_STAT_PASS_TOO_BIG,
                                           NPF_STAT_PASS_META_FAIL};       // to the kernel untouched
inline constexpr npf_stat kFlowDroppedBeforeClaim[] = {NPF_STAT_DROP_RNR, NPF_STAT_DROP_CONTENDED,
                                                       NPF_STAT_DROP_CSUM}; // no buffer taken
inline constexpr npf_stat kFlowClaimed[] = {NPF_STAT_REDIR_PRIMARY, NPF_STAT_REDIR_BACKUP, NPF_STAT_REDIR_FAIL,
                                            NPF_STAT_DROP_BAD_DESC};        // a buffer (seq) taken
inline constexpr npf_stat kFlowLostAfterClaim[] = {NPF_STAT_DROP_BAD_DESC,
                                                   NPF_STAT_REDIR_FAIL};    // of those, lost by XDP: LOST

// One flow's datagrams since it was opened (npf::Flow::stats(), in process
// and through npfd alike). npf_xdp counts every datagram of the flow that
// reaches it once, by outcome; every one that claimed a posted buffer (a seq)
// completes once, or is still in flight:
//
//   reached() = passed() + droppedInXdp() + claimed()
//   claimed() = completedOk + completedTruncated + completedBadCsum + completedLost + inFlight
//
// Both hold exactly in every snapshot. A datagram dropped before XDP (by the
// NIC) never reaches it: no flow can count it. docs/cli.md "Accounting"
// says where each term comes from.
struct FlowStats {
    // The flow's XDP outcomes: xdp[s - NPF_STAT_FLOW_FIRST] for enum npf_stat
    // s >= NPF_STAT_FLOW_FIRST (npf/abi.h); xdpCount(s) reads one.
    std::array<uint64_t, NPF_FLOW_STAT_MAX> xdp{};
    // Completions published to the flow (poll() may not have taken them yet), by status.
    uint64_t completedOk = 0, completedTruncated = 0, completedBadCsum = 0, completedLost = 0;
    // Of completedLost, seqs whose datagram never reached the service: XDP
    // dropped it after claiming the buffer (drop_bad_desc, redir_fail) or the
    // kernel dropped it at the AF_XDP socket (socketDropped()). The rest were
    // dropped by the service (docs/cli.md "Accounting").
    uint64_t lostUnarrived = 0;
    // Seqs XDP claimed that have not completed yet.
    uint64_t inFlight = 0;
    // Not terms of the identity (their seqs are counted above): datagrams that
    // arrived after their seq completed LOST, and frames refused as no seq of
    // this flow's window (duplicate, out of window).
    uint64_t late = 0, rejected = 0;
    // Credits (a flow opened with CreditConfig::enabled; 0 otherwise):
    // messages sent, messages due but withheld by the bound, messages sent
    // after the sender had used up its grant (it was held back: a throttled
    // sender), and the grant last sent (the sender's datagrams below it).
    uint64_t creditsSent = 0, creditsWithheld = 0, creditWaits = 0, creditLimit = 0;

    uint64_t xdpCount(npf_stat s) const noexcept
    {
        return s >= NPF_STAT_FLOW_FIRST && s < NPF_STAT_MAX ? xdp[s - NPF_STAT_FLOW_FIRST] : 0;
    }
    // The sum of the outcomes `which` (e.g. kFlowPassed).
    template <size_t N>
    uint64_t xdpSum(const npf_stat (&which)[N]) const noexcept
    {
        uint64_t n = 0;
        for (npf_stat s : which)
            n += xdpCount(s);
        return n;
    }
    // Passed to the kernel untouched (pass_*): not received by the flow.
    uint64_t passed() const noexcept { return xdpSum(kFlowPassed); }
    // Dropped by XDP before a buffer was claimed: drop_rnr, drop_contended, drop_csum.
    uint64_t droppedInXdp() const noexcept { return xdpSum(kFlowDroppedBeforeClaim); }
    // Took a posted buffer (a seq): redirected, or dropped after the claim.
    uint64_t claimed() const noexcept { return xdpSum(kFlowClaimed); }
    // Of claimed, lost by XDP after the claim (drop_bad_desc, redir_fail): their seqs complete LOST.
    uint64_t lostInXdp() const noexcept { return xdpSum(kFlowLostAfterClaim); }
    uint64_t reached() const noexcept { return passed() + droppedInXdp() + claimed(); }
    uint64_t completed() const noexcept { return completedOk + completedTruncated + completedBadCsum + completedLost; }
    // Of lostUnarrived, those the kernel dropped at the AF_XDP socket (its
    // ring full, no free frame): neither XDP nor the service saw them go. (A
    // late datagram did arrive: its seq is not one of them.)
    uint64_t socketDropped() const noexcept
    {
        const uint64_t other = lostInXdp() + late;
        return lostUnarrived > other ? lostUnarrived - other : 0;
    }
    bool operator==(const FlowStats&) const = default;
};

} // namespace npf
