// End-to-end test rig for npf::Engine and npf-recv: a veth pair between two
// fresh namespaces (IPv6 off, static neighbours: the only packets are the
// ones a test sends), counters read through the real `npfctl stats`, per-queue
// veth counters from `ethtool -S`, and cleanup of whatever npf left behind.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "counters.h"
#include "netns.h"
#include "wait.h"

namespace npf::e2e {

using test::Counters;
using test::delta;

std::string describe(const Counters& c); // non-zero entries, "a=1 b=2"

class Rig : public test::NpfVeth {
public:
    explicit Rig(test::VethOptions opt = {});

    // `npfctl stats IF --json`: counters.xdp (empty if npf is not attached).
    Counters xdp();
    // One XDP counter summed over CPUs, read from the pinned npf_stats map
    // (0 if npf is not attached): cheap enough to poll, unlike npfctl.
    uint64_t xdpStat(uint32_t stat);
    // counters.engine of the same output (the engine's 500 ms snapshot).
    Counters engineSnapshot();
    // counters.region of the same output: its regions' counters, summed.
    Counters regionSnapshot();
    // `ethtool -S rxIf` (rx_queue_N_xdp_redirect, rx_queue_N_drops, ...).
    Counters rxEthtool();
    // Drop counters of both veth ends (`ip -s link`): rx side rx_dropped, tx side tx_dropped.
    uint64_t vethDrops();
    // `npfctl status IF --json`, first object as text ("" if it failed).
    std::string statusJson();
    std::string npfctl(const std::string& args, int* status = nullptr);
    // npfctl(args) exited 0 (else the failure shows what it printed).
    ::testing::AssertionResult npfctlOk(const std::string& args);
};

// Byte i of datagram `id` of `size` bytes: a 6-byte header {id u32 LE,
// size u16 LE} (cut short for tiny datagrams), then a pattern of (id, i).
uint8_t payloadByte(uint32_t id, uint32_t size, uint32_t i) noexcept;
std::vector<uint8_t> payloadFor(uint32_t id, uint32_t size);
constexpr uint32_t kHeader = 6;
// Datagram ids carry the sender in the top byte.
constexpr uint32_t senderId(uint32_t sender, uint32_t k) noexcept { return (sender << 24) | k; }

// A UDP sender in its own thread, which enters the tx namespace first.
struct SendPlan {
    uint32_t sender = 0;   // top byte of every id
    uint32_t count = 0;    // datagrams k = 0 .. count-1
    uint16_t srcPort = 0;  // 0 = any
    uint16_t dstPort = 0;
    double rate = 0;       // datagrams/s; 0 = flat out
    uint32_t (*size)(uint32_t k) = nullptr;
    // Flow control: datagram k goes out only once k < window + done(), done()
    // being how many datagrams the receiver is through with. With a window
    // below the posted buffers and the veth's ring no datagram can find no
    // buffer or overflow a ring, however slowly the receiver runs: the test
    // holds on a loaded machine. 0 = none (a burst that is meant to overrun).
    uint32_t window = 0;
    std::function<uint64_t()> done;
};

class Sender {
public:
    Sender(test::VethPair& veth, SendPlan plan);
    // Binds the socket (in the tx namespace) without sending.
    ~Sender(); // joins
    Sender(const Sender&) = delete;
    Sender& operator=(const Sender&) = delete;

    // Sets SendPlan::window and ::done before start().
    void flowControl(uint32_t window, std::function<uint64_t()> done)
    {
        plan_.window = window;
        plan_.done = std::move(done);
    }
    void start();
    void join();
    uint64_t sent() const { return sent_.load(); }
    uint64_t retries() const { return retries_.load(); } // sendto refused (ENOBUFS/EAGAIN), resent
    double seconds() const { return seconds_; }
    const std::string& error() const { return error_; }
    int fd() const { return fd_; }
    // Sends one datagram of `size` bytes with id `id` now (the calling thread).
    void sendOne(uint32_t id, uint32_t size);

private:
    void run();
    void awaitWindow(uint32_t k);
    test::VethPair& veth_;
    SendPlan plan_;
    int fd_ = -1;
    std::thread thread_;
    std::atomic<uint64_t> sent_{0}, retries_{0};
    double seconds_ = 0;
    std::string error_;
};

// Sends `plan` from the tx namespace and returns once the last datagram is
// out: the sender's error, "" if none.
std::string sendDatagrams(test::VethPair& veth, SendPlan plan);

// Sends a raw Ethernet frame out of the tx end of the veth (from its
// namespace); throws std::system_error if it cannot.
void sendRaw(Rig& rig, const std::vector<uint8_t>& frame);

// A child process in a namespace (nsenter execs, so the pid is the program's).
class Child {
public:
    // readyFd: argv is npf-recv's and gets "--ready-fd N" for a pipe whose
    // read end ready() reads.
    Child(const std::string& netnsPath, const std::vector<std::string>& argv, const std::string& stderrPath,
          bool readyFd = false);
    ~Child(); // SIGKILL + reap if still running
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }
    void kill(int sig);
    // Waits up to `ms` for exit; returns true with *status (exit code, or 128+signal).
    bool wait(int ms, int* status);
    bool running();
    // Reads the ready pipe until npf-recv's "ready" line. Fails, with the
    // child's stderr, at end of file (it exited) or after `deadline`.
    ::testing::AssertionResult ready(std::chrono::milliseconds deadline = test::kDeadline);

private:
    pid_t pid_ = -1;
    bool reaped_ = false;
    int readyFd_ = -1; // read end of the ready pipe
    std::string stderrPath_;
};

std::string readFile(const std::string& path);

// A fresh directory under /tmp, removed with its content.
struct TempDir {
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string path;
};

// Concatenated payloads of sender `sid`, datagrams first .. first+n-1, datagram k of size(k) bytes.
std::string streamBytes(uint32_t sid, uint32_t first, uint32_t n, uint32_t (*size)(uint32_t));

// A plain kernel UDP socket bound to the flow port in the rx namespace: it
// gets whatever XDP passes to the stack.
class KernelSocket {
public:
    KernelSocket(Rig& rig, uint16_t port);
    ~KernelSocket();
    KernelSocket(const KernelSocket&) = delete;
    KernelSocket& operator=(const KernelSocket&) = delete;

    // Every datagram that arrives until none came for `quiet`.
    std::vector<std::string> drain(std::chrono::milliseconds quiet);
    // Receives until *out holds `count` datagrams or `ms` passed; then takes
    // whatever else arrives within `quietMs` (a surplus is a failure too).
    void receive(std::vector<std::string>* out, size_t count, int ms, int quietMs);

private:
    bool one(std::vector<std::string>* out, int timeoutMs); // one datagram within timeoutMs
    int fd_ = -1;
};
// A SendPlan::done for npf-recv: how many whole datagrams k = first, first+1, ...
// of size(k) bytes the file at `path` (its output) holds so far.
std::function<uint64_t()> datagramsWritten(const std::string& path, uint32_t first, uint32_t (*size)(uint32_t));
// A SendPlan::done when the receiver may not take them all: how many packets
// XDP on the rx interface has seen since this call (a window then only keeps
// the veth's ring from overflowing).
std::function<uint64_t()> seenByXdp(Rig& rig);

// npf-recv's --json exit summary: the last line of its stderr that is a JSON
// object (null if there is none).
nlohmann::json jsonSummary(const std::string& errPath);
// Datagrams the summary accounts for: written + every reason not written
// (LOST, BAD_CSUM, dropped in XDP, passed to the kernel, in flight, not
// polled, failed to write). It must equal "reached" (the flow's datagrams XDP
// saw); ~0 when the summary does not add up.
uint64_t accountedFor(const nlohmann::json& j);

// trafgen (netsniff-ng) is installed.
bool haveTrafgen();
// A real packet generator into a running npf-recv (`recv`, ready, started
// with --idle and --json, stderr to `err`, in process or --connect): trafgen
// sends `n` 1400-byte UDP datagrams with correct checksums flat out from the
// tx namespace to `port`, npf-recv stopped (SIGSTOP) for a stretch of the
// stream so that its buffers run out. Then npf-recv's summary must account
// for every one: reached + what fell before XDP == n, nothing in flight.
::testing::AssertionResult generatorAccounted(Rig& rig, const TempDir& dir, Child& recv, const std::string& err,
                                              uint16_t port, uint64_t n);

} // namespace npf::e2e
