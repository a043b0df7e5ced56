// Traffic for the benchmark: IPv4/UDP datagrams from the tx namespace to the
// rx namespace (198.18.0.0/15 only), payloads stamped with npfb_hdr.
//  - LiveGenerator: XDP live frames (bpf_prog_test_run_opts with
//    BPF_F_TEST_XDP_LIVE_FRAMES) on the tx veth, one thread per CPU given.
//    On veth the peer's RX queue is the sending CPU modulo its queue count.
//  - SocketSender: sendmmsg from a UDP socket, for low rates.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

struct bench_gen;

namespace npf::bench {

struct TrafficConfig {
    std::string txNsPath; // /run/netns/<tx>
    std::string txIf;
    std::string srcMac, dstMac, srcAddr, dstAddr;
    uint16_t dport = 9000;
    uint16_t sportBase = 40000;
    uint32_t flows = 1;    // source ports sportBase .. sportBase + flows - 1
    uint32_t payload = 1472;
    bool udpCsum = true;   // false: UDP checksum 0, "none" over IPv4 (not verified by anyone)
    double pps = 0;        // offered rate, all threads together; 0 = as fast as it goes
    std::vector<int> cpus{0}; // one sending thread per entry, pinned there
};

class Sender {
public:
    virtual ~Sender() = default;
    // Sends for `seconds` in the background.
    virtual void start(double seconds) = 0;
    virtual void join() = 0;
    virtual uint64_t sent() const = 0;
    // CPU seconds the sending threads used (valid after join()).
    virtual double cpuSeconds() const = 0;
    // True if it sends from child processes (its CPU time is not this process's).
    virtual bool separateProcesses() const = 0;
    virtual std::string error() const = 0;
    virtual const char* kind() const = 0;
};

// The frame every generator run starts from: IPv4 header checksummed, UDP
// checksum correct for it (or 0 without udpCsum).
std::vector<uint8_t> templateFrame(const TrafficConfig& c);

// The UDP checksum of a generated frame (Ethernet, IPv4 without options,
// UDP, payloadLen bytes of payload) holds, or it has none, given the sum of
// its payload (csumCopy or csumPartial over it). What a receiver that
// verifies what it delivers checks.
bool udpCsumHolds(const uint8_t* frame, uint32_t payloadLen, uint64_t payloadSum) noexcept;

// Load-time settings of the npfb_gen program (bench_gen.skel.h) for traffic
// c sent from template `frame`: source ports, flows, and for udpCsum the
// fixed part of the UDP checksum (csum_fixed). Before bench_gen__load().
void configureGenerator(::bench_gen* skel, const TrafficConfig& c, const std::vector<uint8_t>& frame);

// Why this kernel refuses XDP live frames (a run of npfb_probe, which drops
// what it gets: nothing is sent), or "" when it runs them.
std::string liveFramesRefused();

std::unique_ptr<Sender> makeLiveGenerator(const TrafficConfig& c);
std::unique_ptr<Sender> makeSocketSender(const TrafficConfig& c);

} // namespace npf::bench
