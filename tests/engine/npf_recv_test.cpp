// npf-recv (the real binary) in the rx namespace: killed mid-stream, traffic
// falls back to the kernel stack and a restarted npf-recv resumes from the
// pinned state; the "done means": a cold npf-recv receives a stream a
// stock tool (socat) sends, byte for byte; its exit summary accounts for
// every datagram sent; wrong UDP checksums are reported, never written.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "engine_fixture.h"
#include "packet_builder.h"
#include "region/page_pool.h"
#include "region/uffd.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
constexpr uint16_t kPort = 7300;

uint32_t sizeVaried(uint32_t k) { return 1472 - (k * 37) % 600; }

std::string streamBytes(uint32_t sid, uint32_t first, uint32_t n) { return e2e::streamBytes(sid, first, n, sizeVaried); }

std::vector<std::string> recvArgs(Rig& rig, const std::string& out, bool cold)
{
    std::vector<std::string> a = {NPF_RECV_PATH, rig.rxIf(), std::to_string(kPort), "-o", out};
    if (cold)
        a.push_back("--cold");
    return a;
}

// npf-recv's text exit summary as "group.name" -> value: the indented
// "  group  name=value ...  # note" lines after the "npf-recv: " line.
Counters textSummary(const std::string& errPath)
{
    std::istringstream in(readFile(errPath));
    std::string line;
    Counters c;
    bool inSummary = false;
    while (std::getline(in, line)) {
        if (line.rfind("npf-recv: ", 0) == 0 && line.find("written") != std::string::npos) {
            inSummary = true;
            continue;
        }
        if (!inSummary || line.rfind("  ", 0) != 0)
            continue;
        std::istringstream words(line.substr(0, line.find('#')));
        std::string group, kv;
        words >> group;
        while (words >> kv) {
            auto eq = kv.find('=');
            if (eq != std::string::npos && eq + 1 < kv.size() && std::isdigit(static_cast<unsigned char>(kv[eq + 1])))
                c[group + "." + kv.substr(0, eq)] = std::stoull(kv.substr(eq + 1));
        }
    }
    return c;
}

// Starts npf-recv with a ready pipe.
std::unique_ptr<Child> startRecv(Rig& rig, const std::vector<std::string>& args, const std::string& err)
{
    return std::make_unique<Child>(rig.veth().rxNs().path(), args, err, true);
}

// Waits until XDP on the rx interface has seen `n` packets more than `before`
// (or the veth dropped them before XDP); the delta.
Counters xdpAfter(Rig& rig, const Counters& before, uint64_t vethBefore, uint64_t n)
{
    Counters d;
    test::waitUntil([&] { return (d = delta(rig.xdp(), before))["rx_total"] + rig.vethDrops() - vethBefore >= n; });
    return d;
}

TEST_F(EngineE2E, NpfRecvKilledMidStreamFallsBackAndRestartResumes)
{
    Rig rig;
    TempDir dir;
    KernelSocket kernel(rig, kPort);
    const std::string out1 = dir.path + "/out1", err1 = dir.path + "/err1";
    const std::string out2 = dir.path + "/out2", err2 = dir.path + "/err2";
    const std::string pins = rig.pinDir();

    // Stream A, killed half-way.
    auto recv1 = startRecv(rig, recvArgs(rig, out1, true), err1);
    ASSERT_TRUE(recv1->ready());
    const uint32_t n = 20000;
    Counters xdp0 = rig.xdp();
    const uint64_t veth0 = rig.vethDrops();
    // Flow control: a window ahead of what npf-recv wrote (so it never runs
    // out of buffers), after the kill ahead of what XDP saw (so the veth's
    // ring never overflows).
    std::atomic<bool> killed{false};
    auto written1 = datagramsWritten(out1, 0, sizeVaried), seen = seenByXdp(rig);
    Sender a(rig.veth(), {.sender = 0, .count = n, .dstPort = kPort, .size = sizeVaried, .window = 128,
                          .done = [&] { return killed.load() ? seen() : written1(); }});
    a.start();
    test::waitUntil([&] { return a.sent() >= n / 2 || !a.error().empty(); });
    killed = true;
    recv1->kill(SIGKILL);
    int st = 0;
    ASSERT_TRUE(recv1->wait(int(test::kDeadline.count()), &st));
    EXPECT_EQ(st, 128 + SIGKILL);
    a.join();
    ASSERT_EQ(a.error(), "");
    Counters d = xdpAfter(rig, xdp0, veth0, n);
    // What XDP passed, the kernel socket has (or gets within the deadline);
    // anything beyond that within 50 ms is a surplus.
    std::vector<std::string> fallback;
    kernel.receive(&fallback, d["pass_no_socket"] + d["redir_fail"], int(test::kDeadline.count()), 50);

    EXPECT_NE(rig.statusJson().find("\"attached\""), std::string::npos) << "XDP program must survive the kill";
    EXPECT_TRUE(fs::exists(pins)) << pins;
    EXPECT_EQ(d["rx_total"], n) << describe(d);
    EXPECT_GT(d["pass_no_socket"], 0u) << describe(d);
    EXPECT_EQ(d["redir_primary"] + d["redir_backup"] + d["redir_fail"] + d["pass_no_socket"], n) << describe(d);
    EXPECT_EQ(fallback.size(), d["pass_no_socket"] + d["redir_fail"]) << describe(d);
    EXPECT_GE(fallback.size(), n / 4) << "the rest of the stream must reach the kernel socket";

    // The kernel socket got a tail of the stream, in order, bit-exact.
    uint32_t firstFallback = n, prev = 0;
    for (size_t i = 0; i < fallback.size(); i++) {
        const std::string& dg = fallback[i];
        ASSERT_GE(dg.size(), kHeader);
        uint32_t id;
        std::memcpy(&id, dg.data(), 4);
        ASSERT_LT(id, n);
        if (i == 0)
            firstFallback = id;
        else
            ASSERT_GT(id, prev) << "kernel path out of order";
        prev = id;
        std::vector<uint8_t> want = payloadFor(id, sizeVaried(id));
        size_t diff = 0;
        while (diff < std::min(dg.size(), want.size()) && uint8_t(dg[diff]) == want[diff])
            diff++;
        ASSERT_TRUE(dg.size() == want.size() && diff == want.size())
            << "datagram " << id << " damaged on the kernel path: " << dg.size() << " bytes, sent " << want.size()
            << ", first difference at byte " << diff;
    }
    EXPECT_EQ(prev, n - 1);
    EXPECT_EQ(fallback.size(), n - firstFallback) << "the kernel path must get every datagram after the first";

    // npf-recv's output: datagrams 0 .. m-1 in order up to the kill (SIGKILL
    // may cut the write() of the last one short: a prefix of it may follow).
    const std::string got1 = readFile(out1);
    uint32_t m = 0;
    size_t bytes = 0;
    while (m < n && bytes + sizeVaried(m) <= got1.size())
        bytes += sizeVaried(m++);
    EXPECT_TRUE(got1 == streamBytes(0, 0, m + (bytes < got1.size())).substr(0, got1.size()))
        << "output of the killed npf-recv is not the stream's prefix";
    EXPECT_LE(m, firstFallback);
    std::printf("[ numbers  ] kill: npf-recv wrote %u datagrams, %u in flight at SIGKILL (steered to the dying "
                "sockets), kernel socket got %zu from datagram %u on\n",
                m, firstFallback - m, fallback.size(), firstFallback);

    // Stream B through a restarted npf-recv that takes the flow over.
    Counters xdp1 = rig.xdp();
    auto recv2 = startRecv(rig, recvArgs(rig, out2, false), err2);
    ASSERT_TRUE(recv2->ready());
    EXPECT_NE(readFile(err2).find("taken over"), std::string::npos) << readFile(err2);
    const uint32_t nb = 10000;
    Sender b(rig.veth(), {.sender = 1, .count = nb, .dstPort = kPort, .size = sizeVaried, .window = 128,
                          .done = datagramsWritten(out2, 0, sizeVaried)});
    b.start();
    b.join();
    ASSERT_EQ(b.error(), "");
    const std::string wantB = streamBytes(1, 0, nb);
    EXPECT_TRUE(test::waitUntil([&] { return fs::file_size(out2) >= wantB.size(); }))
        << "npf-recv wrote " << fs::file_size(out2) << " of " << wantB.size() << " bytes of stream B";
    recv2->kill(SIGTERM);
    ASSERT_TRUE(recv2->wait(int(test::kDeadline.count()), &st));
    EXPECT_EQ(st, 0) << readFile(err2);
    const std::string got2 = readFile(out2);
    EXPECT_EQ(got2.size(), wantB.size());
    EXPECT_TRUE(got2 == wantB) << "restarted npf-recv output differs from stream B";
    // XDP handled all of B before npf-recv wrote the last of it: a datagram it
    // passed would be queued on the kernel socket by now.
    EXPECT_EQ(kernel.drain(0ms).size(), 0u) << "stream B leaked to the kernel stack";
    Counters d2 = delta(rig.xdp(), xdp1);
    EXPECT_EQ(d2["pass_no_socket"], 0u) << describe(d2);
    EXPECT_EQ(d2["redir_primary"] + d2["redir_backup"], nb) << describe(d2);
    EXPECT_NE(rig.statusJson().find("\"attached\""), std::string::npos)
        << "npf-recv must not detach a program it did not attach";
    // The flow was the killed npf-recv's: the one that took it over removed it.
    int rcList = -1;
    const std::string flows = rig.npfctl("flow list " + rig.rxIf() + " --json", &rcList);
    EXPECT_EQ(rcList, 0);
    EXPECT_EQ(flows.find("\"port\""), std::string::npos) << "flow left behind: " << flows;
    std::string err2text = readFile(err2);
    std::printf("[ numbers  ] restart: %s", err2text.substr(err2text.find("npf-recv: ")).c_str());

    EXPECT_TRUE(rig.npfctlOk("detach --force " + rig.rxIf()));
    EXPECT_FALSE(fs::exists(pins)) << "detach --force must remove the pins";
}

// A flow the operator added with npfctl is left in place by an npf-recv
// that served it (and so is the program npfctl attached).
TEST_F(EngineE2E, NpfRecvLeavesAnOperatorsFlowInPlace)
{
    Rig rig;
    TempDir dir;
    ASSERT_TRUE(rig.npfctlOk("attach " + rig.rxIf()));
    ASSERT_TRUE(rig.npfctlOk("flow add " + rig.rxIf() + " " + std::to_string(kPort)));
    const std::string out = dir.path + "/out", err = dir.path + "/err";
    std::vector<std::string> args = recvArgs(rig, out, false);
    args.insert(args.end(), {"-n", "100"});
    Child recv(rig.veth().rxNs().path(), args, err, true);
    ASSERT_TRUE(recv.ready());
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = 100, .dstPort = kPort, .size = sizeVaried, .window = 128,
                                         .done = datagramsWritten(out, 0, sizeVaried)}), "");
    int st = -1;
    ASSERT_TRUE(recv.wait(int(test::kDeadline.count()), &st)) << readFile(err);
    EXPECT_EQ(st, 0) << readFile(err);
    EXPECT_TRUE(readFile(out) == streamBytes(0, 0, 100));
    int rc = -1;
    const std::string flows = rig.npfctl("flow list " + rig.rxIf() + " --json", &rc);
    EXPECT_NE(flows.find("\"port\": " + std::to_string(kPort)), std::string::npos) << flows;
    EXPECT_TRUE(rig.npfctlOk("detach " + rig.rxIf()));
}

// Done means: npf-recv on a veth in a namespace, region cold, receives a
// stream sent by a stock tool from the peer namespace, byte for byte.
// socat sends a 4 MiB file into a cold npf-recv (extra arguments `more`):
// its output is the file byte for byte; returns its stderr (the summary).
std::string coldSocat(Rig& rig, const std::vector<std::string>& more)
{
    TempDir dir;
    const std::string in = dir.path + "/in", out = dir.path + "/out", err = dir.path + "/err";
    const size_t size = 4 << 20;
    {
        std::vector<uint8_t> data = payloadFor(0xfeed, uint32_t(size)); // not a datagram: just bytes
        std::ofstream f(in, std::ios::binary);
        f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    }
    const size_t datagrams = (size + 1023) / 1024;
    std::vector<std::string> args = recvArgs(rig, out, true);
    args.insert(args.end(), {"-n", std::to_string(datagrams), "--idle", "3"});
    args.insert(args.end(), more.begin(), more.end());
    Child recv(rig.veth().rxNs().path(), args, err, true);
    EXPECT_TRUE(recv.ready());
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(test::sh(rig.veth().txNs().exec() + "socat -u -b 1024 FILE:" + in + " UDP:" + rig.rxAddr() + ":" +
                       std::to_string(kPort)),
              0);
    double sendSec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int st = -1;
    EXPECT_TRUE(recv.wait(int(test::kDeadline.count()), &st)) << "npf-recv did not finish";
    EXPECT_EQ(st, 0) << readFile(err);
    const std::string got = readFile(out), want = readFile(in);
    EXPECT_EQ(got.size(), want.size()) << readFile(err);
    EXPECT_TRUE(got == want) << "npf-recv output differs from the file socat sent";
    std::string e = readFile(err);
    std::printf("[ numbers  ] socat: %zu datagrams in %.3f s = %.0f/s; %s", datagrams, sendSec, datagrams / sendSec,
                e.substr(std::min(e.size(), e.find("npf-recv: "))).c_str());
    return e;
}

// The summary names where the cold region's pages came from:
// --region-memory anon copies each one in (no page pool), pool moves each
// one in from the pool.
TEST_F(EngineE2E, NpfRecvColdReceivesSocatStreamByteForByte)
{
    Rig rig;
    const std::string e = coldSocat(rig, {"--region-memory", "anon"});
    EXPECT_NE(e.find(" route=anon-4k "), std::string::npos) << e;
    EXPECT_NE(e.find(" pool_taken=0 pool_fresh=0 pool_refills=0 "), std::string::npos) << e;
}

TEST_F(EngineE2E, NpfRecvFromAPagePoolCountsThePoolsPages)
{
    if (!userfaultfdHasMove())
        GTEST_SKIP() << "no UFFDIO_MOVE (Linux 6.8): no page pool";
    Rig rig;
    const std::string e = coldSocat(rig, {"--region-memory", "pool"});
    EXPECT_NE(e.find(" route=pool-4k "), std::string::npos) << e;
    const size_t at = e.find(" pool_taken=");
    ASSERT_NE(at, std::string::npos) << e;
    EXPECT_GE(std::stoull(e.substr(at + 12)), (4u << 20) / 4096) << "every page of the 4 MiB came out of the pool";
}

// --reserve: pages faulted in before npf-recv says it is ready. On the copy
// route a run of them is freed before each copy (reserve_freed): the 4 MiB
// stream's buffers (4096 datagrams of 1 KiB in 2 KiB buffers: 2048 pages)
// take all of an 8 MiB reserve (prefetch runs past the stream's end); in
// the pool a 16 MiB reserve is the pool, and no fresh page goes into it.
TEST_F(EngineE2E, NpfRecvTakesAColdRegionsPagesFromItsReserve)
{
    Rig rig;
    const std::string e = coldSocat(rig, {"--region-memory", "anon", "--reserve", "8M"});
    EXPECT_NE(e.find(" route=anon-4k "), std::string::npos) << e;
    EXPECT_NE(e.find(" reserve_freed=2048 "), std::string::npos) << e;
    if (!userfaultfdHasMove())
        return;
    const std::string p = coldSocat(rig, {"--region-memory", "pool", "--reserve", "16M"});
    EXPECT_NE(p.find(" route=pool-4k "), std::string::npos) << p;
    EXPECT_NE(p.find(" pool_fresh=0 pool_refills=0 "), std::string::npos) << p;
    EXPECT_NE(p.find(" reserve_freed=0 "), std::string::npos) << p;
}

// A region of 2 MiB pages reserves what it may hold resident by default
// (--reserve auto): its 16 MiB, faulted in before npf-recv is ready, so no
// fresh huge page is allocated while the stream arrives. --reserve 0 opts out.
TEST_F(EngineE2E, NpfRecvReservesARegionOf2MiBPagesByDefault)
{
    if (!userfaultfdHasMove() || !transparentHugePagesOffered())
        GTEST_SKIP() << "no UFFDIO_MOVE (Linux 6.8) or no transparent huge pages: no 2 MiB page pool";
    Rig rig;
    const std::string e = coldSocat(rig, {"--page-size", "2M", "--region", "16M"});
    EXPECT_NE(e.find(" route=pool-2m-thp "), std::string::npos) << e;
    EXPECT_NE(e.find(" reserve_mib=16 "), std::string::npos) << e;
    EXPECT_NE(e.find(" pool_fresh=0 pool_refills=0 "), std::string::npos) << e;
    const std::string none = coldSocat(rig, {"--page-size", "2M", "--region", "16M", "--reserve", "0"});
    EXPECT_NE(none.find(" reserve_mib=0 "), std::string::npos) << none;
}

// A memfd's pages are not the engine's to reserve: refused, with the way to
// reserve 2 MiB pages said.
TEST_F(EngineE2E, NpfRecvRefusesAReserveInAMemfd)
{
    Rig rig;
    TempDir dir;
    const std::string err = dir.path + "/err";
    std::vector<std::string> args = recvArgs(rig, "/dev/null", true);
    args.insert(args.end(), {"--region-memory", "memfd", "--reserve", "1M"});
    Child recv(rig.veth().rxNs().path(), args, err, false);
    int st = -1;
    ASSERT_TRUE(recv.wait(int(test::kDeadline.count()), &st));
    EXPECT_EQ(st, 2) << readFile(err);
    EXPECT_NE(readFile(err).find("nr_hugepages"), std::string::npos) << readFile(err);
}

// Issue 7: more datagrams arrive than npf-recv has buffers posted (it is
// stopped while they arrive), so XDP drops the rest as drop_rnr; the exit
// summary accounts for every datagram sent, exactly (the rig's namespaces
// carry only the test's packets), and the output is the stream's prefix.
TEST_F(EngineE2E, NpfRecvSummaryAccountsForEveryDatagramWhenBuffersRunOut)
{
    Rig rig;
    TempDir dir;
    const std::string out = dir.path + "/out", err = dir.path + "/err";
    // 256 KiB of 2048-byte buffers: 128 posted.
    std::vector<std::string> args = recvArgs(rig, out, false);
    args.insert(args.end(), {"--region", "256K", "--idle", "1", "--json"});
    Child recv(rig.veth().rxNs().path(), args, err, true);
    ASSERT_TRUE(recv.ready());

    const uint32_t n = 1000;
    Counters xdp0 = rig.xdp();
    uint64_t veth0 = rig.vethDrops();
    recv.kill(SIGSTOP);
    // A window ahead of XDP: drop_rnr is the point, an overflowing veth ring is not.
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 0, .count = n, .dstPort = kPort, .size = sizeVaried, .window = 128,
                                         .done = seenByXdp(rig)}), "");
    const Counters seen = xdpAfter(rig, xdp0, veth0, n);
    recv.kill(SIGCONT);
    int st = -1;
    ASSERT_TRUE(recv.wait(int(test::kDeadline.count()), &st)) << "npf-recv did not exit on --idle";
    EXPECT_EQ(st, 0) << readFile(err);
    EXPECT_EQ(seen.at("rx_total"), n) << "XDP saw " << seen.at("rx_total") << " of " << n
                                      << " datagrams; veth drops " << rig.vethDrops() - veth0;

    nlohmann::json j = jsonSummary(err);
    ASSERT_TRUE(j.is_object()) << readFile(err);
    const uint64_t written = j["datagrams"].get<uint64_t>();
    EXPECT_EQ(accountedFor(j), n) << j.dump(2) << "\nveth drops " << rig.vethDrops() - veth0;
    EXPECT_EQ(j["reached"].get<uint64_t>(), n) << j.dump(2);
    EXPECT_GT(j["flow"]["xdp"]["drop_rnr"].get<uint64_t>(), 0u) << j.dump(2);
    EXPECT_EQ(j["flow"]["xdp"]["drop_rnr"].get<uint64_t>(), j["not_written"]["dropped_in_xdp"].get<uint64_t>())
        << j.dump(2);
    EXPECT_EQ(written, j["polled"]["ok"].get<uint64_t>()) << j.dump(2);
    EXPECT_GE(written, 1u);
    EXPECT_LE(written, 128u) << "more written than buffers were posted while npf-recv was stopped";
    EXPECT_EQ(j["polled"]["lost"].get<uint64_t>(), 0u) << j.dump(2);
    EXPECT_EQ(j["not_written"]["in_flight"].get<uint64_t>(), 0u) << "--idle exits with nothing claimed uncompleted";
    EXPECT_EQ(j["not_written"]["not_polled"].get<uint64_t>(), 0u) << "--idle exits with every completion polled";
    EXPECT_TRUE(readFile(out) == streamBytes(0, 0, uint32_t(written)))
        << "output is not the first " << written << " datagrams of the stream";
    std::printf("[ numbers  ] buffers run out: %u sent, %llu written, drop_rnr %llu\n", n,
                (unsigned long long)written, (unsigned long long)j["flow"]["xdp"]["drop_rnr"].get<uint64_t>());
}

// A datagram with a wrong UDP checksum between good ones: the text summary
// reports it as a checksum error, the output holds only the good ones.
TEST_F(EngineE2E, NpfRecvReportsWrongUdpChecksumAndDoesNotWriteIt)
{
    Rig rig;
    TempDir dir;
    const std::string out = dir.path + "/out", err = dir.path + "/err";
    const uint32_t good = 10;
    std::vector<std::string> args = recvArgs(rig, out, true);
    args.insert(args.end(), {"-n", std::to_string(good + 1)});
    Child recv(rig.veth().rxNs().path(), args, err, true);
    ASSERT_TRUE(recv.ready());

    test::EthSpec eth{.dst = test::macAddr(rig.veth().rxMac()), .src = test::macAddr(rig.veth().txMac())};
    test::Ipv4Spec ip{.src = test::ipv4Addr(rig.txAddr()), .dst = test::ipv4Addr(rig.rxAddr())};
    std::vector<uint8_t> bad = test::PacketBuilder()
                                   .eth(eth)
                                   .ipv4(ip)
                                   .udp({.sport = 40001, .dport = kPort})
                                   .payload(payloadFor(0xbad, 700))
                                   .build();
    bad[14 + 20 + 6] ^= 0x5a; // the UDP checksum's high byte: now wrong
    ASSERT_FALSE(bad[14 + 20 + 6] == 0 && bad[14 + 20 + 7] == 0) << "checksum 0 would mean none";

    Sender tx(rig.veth(), {.sender = 0, .count = 0, .dstPort = kPort, .size = sizeVaried});
    for (uint32_t k = 0; k < good / 2; k++)
        tx.sendOne(senderId(0, k), sizeVaried(k));
    sendRaw(rig, bad);
    for (uint32_t k = good / 2; k < good; k++)
        tx.sendOne(senderId(0, k), sizeVaried(k));
    int st = -1;
    ASSERT_TRUE(recv.wait(int(test::kDeadline.count()), &st))
        << "npf-recv did not stop after " << good + 1 << " datagrams";
    EXPECT_EQ(st, 0) << readFile(err);

    Counters c = textSummary(err);
    EXPECT_EQ(c["polled.bad_csum"], 1u) << readFile(err);
    EXPECT_EQ(c["polled.ok"], good) << readFile(err);
    EXPECT_EQ(c["polled.lost"], 0u) << readFile(err);
    EXPECT_EQ(c["flow.completed_bad_csum"], 1u) << readFile(err);
    EXPECT_EQ(c["flow.reached"], good + 1) << readFile(err);
    EXPECT_EQ(c["xdp.drop_csum"], 0u) << "the IP header is fine: XDP steers it, npf finds the checksum wrong";
    EXPECT_EQ(c["xdp.redir_primary"] + c["xdp.redir_backup"], good + 1) << readFile(err);
    EXPECT_TRUE(readFile(out) == streamBytes(0, 0, good)) << "output must be the good datagrams only";
    const std::string e = readFile(err);
    std::printf("[ numbers  ] wrong checksum: %s",
                e.substr(std::min(e.size(), e.find("npf-recv: " + std::to_string(good + 1) + " datagrams"))).c_str());
}

// A veth peer with tx checksum offload sends partial UDP checksums: npf-recv
// reports them as wrong and writes nothing; with --no-udp-csum it writes
// every datagram (stopped by SIGTERM, which still prints the summary).
TEST_F(EngineE2E, NpfRecvNoUdpCsumAcceptsPartialChecksumsOfATrustedPeer)
{
    Rig rig(test::VethOptions{.txChecksumOffload = true});
    TempDir dir;
    const uint32_t n = 50;
    const std::string want = streamBytes(0, 0, n);
    for (bool verify : {true, false}) {
        SCOPED_TRACE(verify ? "default (verify)" : "--no-udp-csum");
        const std::string run = verify ? "1" : "2", out = dir.path + "/out" + run, err = dir.path + "/err" + run;
        std::vector<std::string> args = recvArgs(rig, out, false);
        args.push_back("--json");
        if (verify)
            args.insert(args.end(), {"-n", std::to_string(n)});
        else
            args.push_back("--no-udp-csum");
        Child recv(rig.veth().rxNs().path(), args, err, true);
        ASSERT_TRUE(recv.ready());
        ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 0, .count = n, .dstPort = kPort, .size = sizeVaried}), "");
        if (!verify) {
            EXPECT_TRUE(test::waitUntil([&] { return !recv.running() || fs::file_size(out) >= want.size(); }))
                << readFile(err);
            recv.kill(SIGTERM);
        }
        int st = -1;
        ASSERT_TRUE(recv.wait(int(test::kDeadline.count()), &st)) << readFile(err);
        EXPECT_EQ(st, 0) << readFile(err);
        nlohmann::json j = jsonSummary(err);
        ASSERT_TRUE(j.is_object()) << readFile(err);
        EXPECT_EQ(accountedFor(j), n) << j.dump(2);
        const std::string got = readFile(out);
        if (verify) {
            // A partial checksum passes by chance with p = 1/65535 per datagram.
            const uint64_t ok = j["polled"]["ok"].get<uint64_t>(), bad = j["polled"]["bad_csum"].get<uint64_t>();
            EXPECT_EQ(ok + bad, n) << j.dump(2);
            EXPECT_GE(bad, n - 1) << j.dump(2);
            EXPECT_EQ(j["engine"]["counters"]["csum_errors"].get<uint64_t>(), bad) << j.dump(2);
            if (ok == 0) {
                EXPECT_EQ(got.size(), 0u) << "a datagram with a wrong checksum was written";
            }
        } else {
            EXPECT_EQ(j["polled"]["ok"].get<uint64_t>(), n) << j.dump(2);
            EXPECT_EQ(j["polled"]["bad_csum"].get<uint64_t>(), 0u) << j.dump(2);
            EXPECT_TRUE(got == want) << "--no-udp-csum: output differs from the stream";
        }
    }
}

// The "done means": a real packet generator's datagrams are
// accounted for exactly by npf-recv in process (generatorAccounted).
TEST_F(EngineE2E, NpfRecvAccountsForEveryDatagramOfARealGenerator)
{
    if (!haveTrafgen())
        GTEST_SKIP() << "trafgen missing (netsniff-ng; scripts/deps.sh installs it)";
    Rig rig;
    TempDir dir;
    const std::string err = dir.path + "/err";
    std::vector<std::string> args = recvArgs(rig, "/dev/null", false);
    args.insert(args.end(), {"--idle", "1", "--json"});
    Child recv(rig.veth().rxNs().path(), args, err, true);
    ASSERT_TRUE(recv.ready());
    EXPECT_TRUE(generatorAccounted(rig, dir, recv, err, kPort, 200000));
}

} // namespace
} // namespace npf::e2e
