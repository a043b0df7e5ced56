// libnpf: send the datagrams of one npf flow, paced by the receiver's credits.
//
//   npf::Sender s({.to = "198.18.0.2", .port = 9000});
//   std::vector<std::span<const uint8_t>> dgrams = ...;   // the payloads, in order
//   int64_t n = s.send(dgrams);   // >= 0: sent; -ETIMEDOUT: no credit within the timeout
//
// A flow opened with credits (npf::CreditConfig) tells its sender how many of
// its datagrams have a posted buffer waiting (npf_credit, npf/abi.h). A Sender
// sends no datagram past that grant, so none is dropped for want of a buffer
// (drop_rnr), however slowly the receiver's pages come in; it sends
// `initialWindow` datagrams before the first credit (the receiver learns the
// sender's address from them). Plain mode (credits = false) honours nothing:
// for receivers without credits, optionally paced by `rate`.
//
// Sending is sendmmsg(2) from one UDP socket, unconnected (credits come from
// an ephemeral port of the receiver's address); credits are read from the same
// socket. A datagram that is not a credit of this flow from the destination
// address is counted and ignored. One thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace npf {

struct SenderConfig {
    std::string to;            // the receiver's IPv4 or IPv6 address
    uint16_t port = 0;         // the flow's UDP port
    std::string from;          // local address to send from; "" = the kernel's choice
    uint16_t fromPort = 0;     // local port; 0 = an ephemeral one
    bool credits = true;       // false: plain mode
    uint32_t initialWindow = 64; // datagrams sent before the first credit
    // How long send() waits for credit (or, plain, for socket room) before it
    // gives up: it returns what it sent, or -ETIMEDOUT if nothing.
    std::chrono::milliseconds timeout{2000};
    double rate = 0;           // datagrams per second, at most; 0 = no limit
};

struct SenderStats {
    uint64_t sent = 0;            // datagrams sent
    uint64_t credits = 0;         // credit messages taken
    uint64_t ignored = 0;         // datagrams on the socket that were no credit of this flow
    uint64_t throttled = 0;       // times the sender had used up its grant and waited for more
    uint64_t waitedNs = 0;        // time spent waiting for credit
    uint64_t rebased = 0;         // credits of a new receiver epoch (it started counting anew)
    uint64_t resynced = 0;        // grants assumed lost in the network and written off
    uint64_t limit = 0;           // the grant: the sender may send its datagrams below it
    uint64_t received = 0;        // the receiver's count in the last credit
    uint64_t lastHintUs = 0;      // the last credit's hint
};

class Sender {
public:
    // Throws std::system_error (socket, bind) or std::invalid_argument (an address).
    explicit Sender(const SenderConfig& cfg);
    ~Sender();
    Sender(const Sender&) = delete;
    Sender& operator=(const Sender&) = delete;

    // Sends the datagrams in order as credit allows, waiting for more when
    // it runs out. Returns how many were sent: all, or fewer when the timeout
    // passed without credit (send the rest again later); -ETIMEDOUT when it
    // passed before the first; another negative errno when sending failed.
    int64_t send(std::span<const std::span<const uint8_t>> datagrams);
    // Reads the credits waiting on the socket now; never blocks.
    void pollCredits() noexcept;
    SenderStats stats() const noexcept;
    // The socket (readable when a credit waits).
    int fd() const noexcept;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace npf
