// Receiver-granted credits (docs/architecture.md, "Credits"; npf_credit in
// npf/abi.h). A flow opened with CreditConfig::enabled has a FlowCredits:
//
//   thread          calls                       touches
//   worker, pager   see() per claimed frame     the sender's identity (peer, base)
//   npf-credit      CreditSender's loop         the grant, the counters, the socket
//
// The grant is what the flow has posted buffers for: XDP's cons up to the
// ring's prod (at most NPF_POST_RING_SIZE ahead), counted from the first
// datagram of the current sender (`base`): a sender that honours it never
// sends a datagram that finds no buffer (drop_rnr). Credits go only to where
// the flow's datagrams came from, from where they went, and at most one per
// NPF_CREDIT_EVERY datagrams that took a buffer since the flow opened, one per
// CreditConfig::interval, and kMaxPerSecond for the whole engine.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "npf/abi.h"
#include "npf/engine.h"
#include "region/epoch.h"
#include "sys/fd.h"
#include "xsk/queue.h"

namespace npf {

class FlowTable;
class ServedFlow;

// A flow's sender as its datagrams name it.
struct CreditPeer {
    uint8_t family = 0;                  // NPF_FAMILY_IPV4 / _IPV6; 0: none seen yet
    uint16_t port = 0;                   // the sender's UDP port, network order
    std::array<uint8_t, 16> addr{};      // the sender's address (IPv4 in addr[0..3])
    std::array<uint8_t, 16> local{};     // the address its datagrams went to: the credits' source
    bool operator==(const CreditPeer&) const = default;
};

// The sender of the packet in `p` (its Ethernet, optional VLAN, IP and UDP
// headers in front of the payload); false if they are not there.
bool peerOf(const xsk::RxPacket& p, CreditPeer* out) noexcept;

// What a flow's credits are made with: its config, and the credit thread's
// kick (an eventfd, shared: a worker may still write it after the thread is
// gone; none: the thread finds a new sender on its own, within kIdleMs).
struct CreditSetup {
    CreditConfig cfg;
    std::shared_ptr<const Fd> kick;
};

class FlowCredits {
public:
    FlowCredits(const CreditSetup& s, uint64_t consAtOpen) noexcept
        : cfg(s.cfg), consAtOpen_(consAtOpen), kick_(s.kick)
    {
    }
    FlowCredits(const FlowCredits&) = delete;
    FlowCredits& operator=(const FlowCredits&) = delete;

    // Any engine thread, for every frame of the flow that claimed seq: a
    // datagram of a new sender (at a seq above where the current one began)
    // starts a new epoch counted from it; an earlier datagram of the current
    // sender, handled late by another thread, moves its start back. A new
    // sender's NPF_CREDIT_EVERY-th datagram kicks the credit thread: its
    // first credit is due then, and the thread may be asleep for kIdleMs.
    void see(const xsk::RxPacket& p, uint64_t seq) noexcept;

    // The state a credit is made of, as of now.
    struct Sender {
        CreditPeer peer;
        uint32_t epoch = 0;
        uint64_t base = 0; // the seq of the sender's datagram number 0
    };
    Sender sender() const;

    const CreditConfig cfg;
    // Counters (FlowStats): written by the credit thread, read by any.
    std::atomic<uint64_t> sent{0}, withheld{0}, waits{0}, limit{0};

private:
    friend class CreditSender;
    static constexpr uint64_t kNoKick = std::numeric_limits<uint64_t>::max();
    void kickAt(uint64_t seq) noexcept;

    const uint64_t consAtOpen_; // datagrams that took a buffer since: cons - consAtOpen_
    const std::shared_ptr<const Fd> kick_;
    std::atomic<uint64_t> kickSeq_{kNoKick}; // kick the credit thread at this seq (once)
    std::atomic<uint64_t> tag_{0}; // of the current peer (0: none); changed under mu_
    std::atomic<uint64_t> base_{0};
    mutable std::mutex mu_;
    CreditPeer peer_;       // under mu_
    uint64_t since_ = 0;    // under mu_: the seq at which peer_ became the sender
    uint32_t epoch_ = 0;    // under mu_
    // The credit thread's own.
    uint32_t grantedEpoch_ = 0;
    uint64_t granted_ = 0;     // the last limit sent in grantedEpoch_
    uint64_t lastNs_ = 0;      // when it went
    uint64_t lastHead_ = 0, lastHeadNs_ = 0; // completion progress, for the hint
    uint64_t lastCons_ = 0, lastProd_ = 0, activeNs_ = 0; // when either last moved
    uint64_t rateCons_ = 0, rateNs_ = 0;                  // cons and time of the last rate sample
    double consPerNs_ = 0;                                // datagrams arriving, EWMA
    double nsPerCompletion_ = 0;
    bool withheldNoted_ = false; // the message due now was counted withheld once
};

// The credit thread of a Service: it looks at each credit flow and sends what
// is due from a UDP socket of the service's network namespace. How soon it
// looks again is each active flow's own: a quarter of the time its sender
// takes to use up what it was granted (at the rate the flow's datagrams come
// in), at least the flow's interval and at most kMaxTickNs; every kIdleMs
// while no flow is active (a datagram, a post or a grant in the last second).
// A wake-up costs tens of microseconds on a VM: a sender with room to spare
// is not looked at every interval.
class CreditSender {
public:
    static constexpr uint64_t kMaxPerSecond = 100'000; // the engine's total
    static constexpr int kIdleMs = 5;
    static constexpr uint64_t kMaxTickNs = 2'000'000;

    // Makes its sockets in the network namespace nsFd (the service's). Its
    // looks at the flows are sections of `epochs` (a flow closed meanwhile
    // is freed after them, as after a worker's batch).
    CreditSender(FlowTable& flows, int nsFd, const std::string& ifname, EpochDomain& epochs);
    ~CreditSender(); // stops and joins the thread
    CreditSender(const CreditSender&) = delete;
    CreditSender& operator=(const CreditSender&) = delete;

    // The eventfd that wakes the thread for a look (CreditSetup::kick).
    const std::shared_ptr<const Fd>& kick() const noexcept { return kick_; }

    // One look at every credit flow (the loop's body, in an epoch section).
    // Returns when to look again, ns from now; 0: no flow is active.
    uint64_t tick(uint64_t nowNs) noexcept;

private:
    void loop() noexcept;
    uint64_t tickFlow(ServedFlow& f, FlowCredits& c, uint64_t nowNs) noexcept;
    bool takeToken(uint64_t nowNs) noexcept;
    bool send(const CreditPeer& to, const npf_credit& msg) noexcept;

    FlowTable& flows_;
    const std::string ifname_;
    EpochDomain& epochs_;
    Fd v4_, v6_;
    double tokens_ = kMaxPerSecond / 10.0;
    uint64_t tokensNs_ = 0;
    Fd stopFd_; // an eventfd: written to stop the loop
    std::shared_ptr<const Fd> kick_;
    std::thread thread_;
};

} // namespace npf
