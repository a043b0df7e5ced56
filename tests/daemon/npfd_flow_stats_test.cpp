// Every datagram of an npfd client's flow accounted to that flow, through
// npfd: Flow::stats() of an npf::Client flow is a flow_stats request,
// answered for the connection's own flows only. Real npfd, real clients,
// real traffic on the rig's veth pair:
//   - one flow, datagrams dropped every way a test can force (no buffer
//     posted, a wrong IPv4 header checksum, a wrong UDP checksum, a forged
//     descriptor outside the region): every term of the accounting exact;
//   - npfd stopped while its socket's rings fill: what the kernel drops at
//     the AF_XDP socket completes LOST, unarrived, and is the kernel's count;
//   - two tenants (two rules, two uids) on one interface: each sees its own
//     flow's numbers only, a flow id of another is refused (no_flow), and
//     npfd's metrics label each flow's drops with its own client.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "counters/flow_stats.h"
#include "dataplane/flow_ring.h"
#include "engine_fixture.h"
#include "hostile_client.h"
#include "ipc/channel.h"
#include "ipc/protocol.h"
#include "metrics_scrape.h"
#include "npf/client.h"
#include "npfd_rig.h"
#include "packet_builder.h"
#include "wait.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

class NpfdFlowStats : public EngineE2E {};

constexpr uint32_t kBytes = 900;
constexpr uint32_t kLen = 2048;    // each posted buffer
constexpr uint64_t kStride = 4096; // buffer i at i * kStride
uint32_t datagramSize(uint32_t) { return kBytes; }

// ---- helpers ------------------------------------------------------------------------------

// This process's descriptors of BPF maps.
std::set<int> bpfMapFds()
{
    std::set<int> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(e.path(), ec).string() == "anon_inode:bpf-map" && !ec)
            out.insert(std::stoi(e.path().filename().string()));
    }
    return out;
}

// The post ring npfd handed a Client for the flow it opened since `before`
// was taken (the one new BPF map), mapped once more: the test writes what a
// buggy or hostile application could.
dataplane::FlowRing ringOpenedSince(const std::set<int>& before)
{
    for (int fd : bpfMapFds())
        if (!before.count(fd))
            return dataplane::FlowRing::adopt(Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)));
    throw std::runtime_error("no post ring map among the descriptors the client got from npfd");
}

// A flow and the completions the test has taken from it.
struct Taken {
    Flow& flow;
    std::vector<npf_completion> got;

    // Takes completions until `n` in all, within the deadline.
    bool until(size_t n)
    {
        const auto end = std::chrono::steady_clock::now() + test::kDeadline;
        npf_completion c[64];
        while (got.size() < n && std::chrono::steady_clock::now() < end) {
            const int k = flow.wait(c, 100ms);
            if (k < 0)
                break;
            got.insert(got.end(), c, c + k);
        }
        return got.size() >= n;
    }
};

// Flow::stats() once the flow has settled: XDP saw `reached` of its
// datagrams and nothing it claimed is in flight. Every snapshot on the way
// must keep the identity (nothing completes unclaimed).
::testing::AssertionResult settled(const Flow& f, uint64_t reached, FlowStats* out)
{
    std::string broken;
    const bool ok = test::waitUntil(
        [&] {
            *out = f.stats();
            if (out->completed() > out->claimed() && broken.empty())
                broken = "a snapshot with more completed (" + std::to_string(out->completed()) + ") than claimed (" +
                         std::to_string(out->claimed()) + ")";
            return out->reached() >= reached && out->inFlight == 0;
        },
        test::kDeadline, 5ms);
    if (!broken.empty())
        return ::testing::AssertionFailure() << broken;
    if (!ok)
        return ::testing::AssertionFailure() << "the flow did not settle: reached " << out->reached() << " of "
                                             << reached << ", in flight " << out->inFlight << ", "
                                             << counters::flowStatsJson(*out).dump();
    return ::testing::AssertionSuccess();
}

// Every XDP outcome of the flow is 0 but those in `want`.
::testing::AssertionResult xdpExactly(const FlowStats& s, const std::vector<std::pair<npf_stat, uint64_t>>& want)
{
    std::string bad;
    for (int st = NPF_STAT_FLOW_FIRST; st < NPF_STAT_MAX; st++) {
        uint64_t expect = 0;
        for (const auto& [w, n] : want)
            if (w == st)
                expect = n;
        const uint64_t got = s.xdpCount(static_cast<npf_stat>(st));
        if (got != expect)
            bad += std::string(" ") + dataplane::kStatNames[st] + "=" + std::to_string(got) + " (expected " +
                   std::to_string(expect) + ")";
    }
    if (bad.empty())
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the flow's XDP outcomes:" << bad;
}

// Where a hand-made frame breaks a checksum: XORed with 0x5a.
constexpr size_t kIpCsumByte = 14 + 10;      // the IPv4 header checksum: XDP drops it (drop_csum)
constexpr size_t kUdpCsumByte = 14 + 20 + 6; // the UDP checksum's high byte: completes BAD_CSUM

// An Ethernet/IPv4/UDP frame from the tx end to the rx end carrying
// `payload` to `port`, one byte of a checksum flipped (sendRaw sends it).
std::vector<uint8_t> badFrame(Rig& rig, uint16_t port, const std::vector<uint8_t>& payload, size_t flip)
{
    std::vector<uint8_t> f =
        test::PacketBuilder()
            .eth({.dst = test::macAddr(rig.veth().rxMac()), .src = test::macAddr(rig.veth().txMac())})
            .ipv4({.src = test::ipv4Addr(rig.txAddr()), .dst = test::ipv4Addr(rig.rxAddr())})
            .udp({.sport = 40001, .dport = port})
            .payload(payload)
            .build();
    f[flip] ^= 0x5a;
    // A UDP checksum of 0 would say "none" (IPv4): not the wrong one wanted.
    if (flip == kUdpCsumByte && f[flip] == 0 && f[flip + 1] == 0)
        f[flip] = 0x5a;
    return f;
}

// Packets the sender's end of the veth pair dropped (tx_dropped): the only
// place a datagram is lost before XDP on the rx end sees it. (The rx end's
// rx_dropped counts XDP's own outcomes too: a redirect the AF_XDP socket
// refused is one.)
uint64_t txDropped(Rig& rig)
{
    const std::string out =
        test::shOut(rig.veth().txNs().exec() + "ip -s -j link show dev " + rig.veth().txIf());
    return nlohmann::json::parse(out).at(0).at("stats64").at("tx").at("dropped").get<uint64_t>();
}

// None dropped before XDP since `before` (txDropped), or reached() cannot be what was sent.
::testing::AssertionResult noDropsBeforeXdp(Rig& rig, uint64_t before)
{
    const uint64_t now = txDropped(rig);
    if (now == before)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the sender's veth dropped " << now - before
                                         << " packets before XDP saw them";
}

// ---- one flow, every drop a test can force ---------------------------------------------------

// Sent, in this order, to one npf::Client flow through npfd:
//   16 datagrams into 16 posted buffers          redir_*, completed OK
//   8 with no buffer posted                      drop_rnr
//   5 with a wrong IPv4 header checksum          drop_csum (before any claim)
//   4 with a wrong UDP checksum, 4 buffers       redir_*, completed BAD_CSUM
//   3 into buffers forged outside the region     drop_bad_desc, completed LOST, lost_unarrived
// Flow::stats() then accounts for each of the 36 exactly.
TEST_F(NpfdFlowStats, EveryDatagramOfAClientFlowIsAccountedExactly)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const uint16_t port = kFirstPort + 20;
    constexpr uint64_t kRegion = 4 << 20;
    Client cli({.socket = npfd.socket(), .regionSize = kRegion, .name = "accounted"});
    const std::set<int> before = bpfMapFds();
    Flow& f = cli.openFlow(port);
    const dataplane::FlowRing ring = ringOpenedSince(before);
    EXPECT_EQ(f.stats(), FlowStats{}) << "a new flow counts nothing";

    constexpr uint32_t kOk = 16, kRnr = 8, kIpCsum = 5, kUdpCsum = 4, kForged = 3;
    constexpr uint64_t kSent = kOk + kRnr + kIpCsum + kUdpCsum + kForged;
    const uint64_t txDropped0 = txDropped(rig);
    const uint64_t rnr0 = rig.xdpStat(NPF_STAT_DROP_RNR), csum0 = rig.xdpStat(NPF_STAT_DROP_CSUM),
                   desc0 = rig.xdpStat(NPF_STAT_DROP_BAD_DESC);
    Taken taken{f, {}};
    uint64_t posted = 0;
    auto post = [&](uint32_t n) {
        for (uint32_t i = 0; i < n; i++, posted++)
            ASSERT_TRUE(f.post(posted * kStride, kLen));
    };
    auto xdpCount = [&](npf_stat s) { return f.stats().xdpCount(s); };

    // OK.
    post(kOk);
    f.flush();
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 1, .count = kOk, .dstPort = port, .size = datagramSize}), "");
    ASSERT_TRUE(taken.until(kOk)) << npfd.log();
    // No buffer: every post was claimed.
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 2, .count = kRnr, .dstPort = port, .size = datagramSize}), "");
    ASSERT_TRUE(test::waitUntil([&] { return xdpCount(NPF_STAT_DROP_RNR) >= kRnr; }, test::kDeadline, 5ms))
        << "drop_rnr " << xdpCount(NPF_STAT_DROP_RNR);
    // A wrong IPv4 header checksum: dropped before a buffer is looked for.
    for (uint32_t k = 0; k < kIpCsum; k++)
        sendRaw(rig, badFrame(rig, port, payloadFor(senderId(3, k), kBytes), kIpCsumByte));
    ASSERT_TRUE(test::waitUntil([&] { return xdpCount(NPF_STAT_DROP_CSUM) >= kIpCsum; }, test::kDeadline, 5ms))
        << "drop_csum " << xdpCount(NPF_STAT_DROP_CSUM);
    // A wrong UDP checksum: steered, npfd finds it while copying.
    post(kUdpCsum);
    f.flush();
    for (uint32_t k = 0; k < kUdpCsum; k++)
        sendRaw(rig, badFrame(rig, port, payloadFor(senderId(4, k), kBytes), kUdpCsumByte));
    ASSERT_TRUE(taken.until(kOk + kUdpCsum)) << npfd.log();
    // Forged: posted as usual, then (before they are published) rewritten in
    // the ring to lie beyond the region, as a buggy application could.
    const uint64_t seq0 = std::atomic_ref<__u64>(ring.cursor()->prod).load(std::memory_order_acquire);
    ASSERT_EQ(seq0, posted) << "every post so far is published";
    post(kForged);
    for (uint64_t s = seq0; s < seq0 + kForged; s++)
        ring.posts()[s & (NPF_POST_RING_SIZE - 1)].offset = kRegion + (s - seq0) * kStride;
    f.flush();
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 5, .count = kForged, .dstPort = port, .size = datagramSize}), "");
    ASSERT_TRUE(taken.until(kOk + kUdpCsum + kForged)) << npfd.log();

    FlowStats s;
    ASSERT_TRUE(settled(f, kSent, &s));
    EXPECT_TRUE(noDropsBeforeXdp(rig, txDropped0));
    SCOPED_TRACE(counters::flowStatsJson(s).dump());
    EXPECT_TRUE(xdpExactly(s, {{NPF_STAT_DROP_RNR, kRnr},
                               {NPF_STAT_DROP_CSUM, kIpCsum},
                               {NPF_STAT_DROP_BAD_DESC, kForged},
                               {NPF_STAT_REDIR_PRIMARY, s.xdpCount(NPF_STAT_REDIR_PRIMARY)},
                               {NPF_STAT_REDIR_BACKUP, s.xdpCount(NPF_STAT_REDIR_BACKUP)}}));
    EXPECT_EQ(s.xdpCount(NPF_STAT_REDIR_PRIMARY) + s.xdpCount(NPF_STAT_REDIR_BACKUP), kOk + kUdpCsum);
    // The identity, term by term.
    EXPECT_EQ(s.reached(), kSent);
    EXPECT_EQ(s.passed(), 0u);
    EXPECT_EQ(s.droppedInXdp(), kRnr + kIpCsum);
    EXPECT_EQ(s.claimed(), kOk + kUdpCsum + kForged);
    EXPECT_EQ(s.completedOk, kOk);
    EXPECT_EQ(s.completedTruncated, 0u);
    EXPECT_EQ(s.completedBadCsum, kUdpCsum);
    EXPECT_EQ(s.completedLost, kForged);
    EXPECT_EQ(s.inFlight, 0u);
    EXPECT_EQ(s.claimed(), s.completed() + s.inFlight);
    EXPECT_EQ(s.lostUnarrived, kForged);
    EXPECT_EQ(s.socketDropped(), 0u);
    EXPECT_EQ(s.late, 0u);
    EXPECT_EQ(s.rejected, 0u);
    // The interface's counters moved by as much (this flow had all the traffic).
    EXPECT_EQ(rig.xdpStat(NPF_STAT_DROP_RNR) - rnr0, kRnr);
    EXPECT_EQ(rig.xdpStat(NPF_STAT_DROP_CSUM) - csum0, kIpCsum);
    EXPECT_EQ(rig.xdpStat(NPF_STAT_DROP_BAD_DESC) - desc0, kForged);
    // And the completions the application took say the same, seq by seq.
    ASSERT_EQ(taken.got.size(), kOk + kUdpCsum + kForged);
    for (uint64_t i = 0; i < taken.got.size(); i++) {
        const npf_completion& c = taken.got[i];
        EXPECT_EQ(c.seq, i);
        const uint16_t want = i < kOk ? NPF_CS_OK : i < kOk + kUdpCsum ? NPF_CS_BAD_CSUM : NPF_CS_LOST;
        EXPECT_EQ(c.status, want) << "seq " << i;
        if (c.status == NPF_CS_OK) {
            const std::vector<uint8_t> p = payloadFor(senderId(1, uint32_t(i)), kBytes);
            EXPECT_EQ(c.len, kBytes);
            EXPECT_EQ(std::memcmp(cli.region() + c.offset, p.data(), kBytes), 0) << "seq " << i;
        }
    }
    // A flow of a lost connection has no numbers to ask for (after
    // reconnect() its id may be another flow's); the client says why.
    cli.reconnect();
    Flow& again = cli.openFlow(port);
    EXPECT_EQ(again.stats(), FlowStats{}) << "the flow opened again starts from nothing";
    try {
        (void)f.stats();
        ADD_FAILURE() << "stats of a flow of a lost connection";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), ENOTCONN) << e.what();
        EXPECT_NE(std::string(e.what()).find("npfd closed the connection"), std::string::npos) << e.what();
    }
    // npfd gone: a clear std::system_error, no hang.
    npfd.kill(SIGKILL);
    int st = -1;
    ASSERT_TRUE(npfd.wait(int(test::kDeadline.count()), &st));
    try {
        (void)again.stats();
        ADD_FAILURE() << "stats with npfd gone";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find("npf flow " + std::to_string(again.id())), std::string::npos)
            << e.what();
        std::cout << "with npfd gone, Flow::stats() throws: " << e.what() << "\n";
    }
}

// npfd stopped (SIGSTOP) with two flows of 4096 buffers posted each: XDP
// claims a buffer for every datagram and redirects it, the queue's RX ring
// (sized for one flow's posts) fills, and the kernel drops the rest at the
// AF_XDP socket. Once npfd runs again, each of those seqs completes LOST,
// unarrived: the flows' socketDropped() add up to exactly the kernel's
// count of drops at the socket (npfctl stats: kernel_rx_dropped).
TEST_F(NpfdFlowStats, DatagramsTheKernelDropsAtTheSocketAreLostUnarrived)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    constexpr uint32_t kN = NPF_POST_RING_SIZE; // per flow
    constexpr uint64_t kPerFlow = uint64_t(kN) * kStride, kRegion = 2 * kPerFlow;
    Client cli({.socket = npfd.socket(), .regionSize = kRegion, .residentBudget = kRegion, .name = "overflow"});
    const uint16_t ports[2] = {uint16_t(kFirstPort + 21), uint16_t(kFirstPort + 22)};
    Flow* flows[2] = {&cli.openFlow(ports[0]), &cli.openFlow(ports[1])};
    cli.populate(0, kRegion); // every datagram takes the fast path
    for (int k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < kN; i++)
            ASSERT_TRUE(flows[k]->post(k * kPerFlow + i * kStride, kLen));
        flows[k]->flush();
    }
    const uint64_t kernel0 = rig.engineSnapshot()["kernel_rx_dropped"];
    const uint64_t txDropped0 = txDropped(rig);
    const uint64_t rx0 = rig.xdpStat(NPF_STAT_RX_TOTAL);

    npfd.kill(SIGSTOP);
    struct Cont { // whatever happens, npfd runs again
        Npfd& d;
        ~Cont() { d.kill(SIGCONT); }
    } cont{npfd};
    for (int k = 0; k < 2; k++) {
        // At most 64 datagrams ahead of XDP: the veth's ring never overflows.
        Sender tx(rig.veth(), {.sender = uint32_t(6 + k), .count = kN, .dstPort = ports[k], .size = datagramSize});
        tx.flowControl(64, seenByXdp(rig));
        tx.start();
        tx.join();
        ASSERT_EQ(tx.error(), "");
    }
    ASSERT_TRUE(test::waitUntil([&] { return rig.xdpStat(NPF_STAT_RX_TOTAL) - rx0 >= 2 * kN; }))
        << "XDP saw " << rig.xdpStat(NPF_STAT_RX_TOTAL) - rx0 << " of " << 2 * kN;
    EXPECT_EQ(rig.xdpStat(NPF_STAT_RX_TOTAL) - rx0, 2 * kN) << "only the test's datagrams";
    npfd.kill(SIGCONT);

    uint64_t socketDropped = 0;
    for (int k = 0; k < 2; k++) {
        SCOPED_TRACE("flow on port " + std::to_string(ports[k]));
        Taken taken{*flows[k], {}};
        ASSERT_TRUE(taken.until(kN)) << npfd.log();
        FlowStats s;
        ASSERT_TRUE(settled(*flows[k], kN, &s));
        SCOPED_TRACE(counters::flowStatsJson(s).dump());
        std::cout << "npfd stopped: port " << ports[k] << ": " << s.completedOk << " of " << kN
                  << " datagrams completed OK, " << s.socketDropped() << " dropped by the kernel at the socket\n";
        EXPECT_EQ(s.reached(), kN);
        EXPECT_EQ(s.xdpCount(NPF_STAT_REDIR_PRIMARY) + s.xdpCount(NPF_STAT_REDIR_BACKUP), kN);
        EXPECT_EQ(s.claimed(), kN);
        EXPECT_EQ(s.passed() + s.droppedInXdp(), 0u);
        EXPECT_EQ(s.completedOk + s.completedLost, kN);
        EXPECT_EQ(s.completedTruncated + s.completedBadCsum + s.inFlight, 0u);
        EXPECT_EQ(s.lostUnarrived, s.completedLost);
        EXPECT_EQ(s.socketDropped(), s.completedLost);
        EXPECT_EQ(s.late + s.rejected, 0u);
        size_t lost = 0;
        for (const npf_completion& c : taken.got)
            lost += c.status == NPF_CS_LOST;
        EXPECT_EQ(lost, s.completedLost);
        socketDropped += s.socketDropped();
    }
    EXPECT_TRUE(noDropsBeforeXdp(rig, txDropped0));
    EXPECT_GT(socketDropped, 0u) << "the socket's ring did not fill (npfd did not stop?)";
    // The kernel's own count, from npfd's stats file (written every 500 ms).
    uint64_t kernel = 0;
    EXPECT_TRUE(test::waitUntil(
        [&] {
            kernel = rig.engineSnapshot()["kernel_rx_dropped"] - kernel0;
            return kernel >= socketDropped;
        },
        test::kDeadline, 50ms));
    EXPECT_EQ(kernel, socketDropped);
}

// ---- two tenants --------------------------------------------------------------------------

// Two rules: tenant A (uid 65534, ports 7400-7499), tenant B (uid 65533,
// ports 7500-7599).
const std::string kTenantRules =
    R"([{"uid": 65534, "ports": ["7400-7499"], "region_bytes": 268435456, "resident_bytes": 67108864, "flows": 4},
    {"uid": 65533, "ports": ["7500-7599"], "region_bytes": 268435456, "resident_bytes": 67108864, "flows": 4}])";

// An npf::Client connected as `uid` (npfd reads the peer's credentials at connect).
std::unique_ptr<Client> clientAs(uid_t uid, const Npfd& npfd, const std::string& name)
{
    return asUser(uid, [&] {
        return std::make_unique<Client>(ClientConfig{.socket = npfd.socket(), .regionSize = 4 << 20, .name = name});
    });
}

// The RemoteError a flow_stats request for `flow` on `ch` gets ("" if it got stats).
std::string refusal(ipc::Channel& ch, uint32_t flow, ipc::ErrorCode* code)
{
    try {
        (void)ch.call(ipc::FlowStatsRequest{flow});
    } catch (const ipc::RemoteError& e) {
        *code = e.code();
        return e.message();
    }
    return "";
}

TEST_F(NpfdFlowStats, EachTenantSeesItsOwnFlowOnly)
{
    Rig rig;
    TempDir dir;
    const uint16_t mport = freePort(rig);
    Npfd npfd(rig, dir, NpfdOptions{.extraArgs = {"--metrics", "127.0.0.1:" + std::to_string(mport)},
                                    .clients = kTenantRules});
    const uint16_t portA = kFirstPort + 30, portB = kVictimPort + 30;
    std::unique_ptr<Client> a = clientAs(kNobody, npfd, "tenant-a");
    std::unique_ptr<Client> b = clientAs(kVictimUid, npfd, "tenant-b");
    Flow& fa = a->openFlow(portA);
    Flow& fb = b->openFlow(portB);

    // A: 8 received, then 6 with no buffer (drop_rnr). B: 10 received.
    constexpr uint32_t kOkA = 8, kRnrA = 6, kOkB = 10;
    for (uint32_t i = 0; i < kOkA; i++)
        ASSERT_TRUE(fa.post(i * kStride, kLen));
    fa.flush();
    for (uint32_t i = 0; i < kOkB; i++)
        ASSERT_TRUE(fb.post(i * kStride, kLen));
    fb.flush();
    const uint64_t txDropped0 = txDropped(rig);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 1, .count = kOkA, .dstPort = portA, .size = datagramSize}), "");
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 2, .count = kOkB, .dstPort = portB, .size = datagramSize}), "");
    Taken ta{fa, {}}, tb{fb, {}};
    ASSERT_TRUE(ta.until(kOkA)) << npfd.log();
    ASSERT_TRUE(tb.until(kOkB)) << npfd.log();
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 3, .count = kRnrA, .dstPort = portA, .size = datagramSize}), "");

    FlowStats sa, sb;
    ASSERT_TRUE(settled(fa, kOkA + kRnrA, &sa));
    ASSERT_TRUE(settled(fb, kOkB, &sb));
    EXPECT_TRUE(noDropsBeforeXdp(rig, txDropped0));
    EXPECT_TRUE(xdpExactly(sa, {{NPF_STAT_DROP_RNR, kRnrA},
                                {NPF_STAT_REDIR_PRIMARY, sa.xdpCount(NPF_STAT_REDIR_PRIMARY)},
                                {NPF_STAT_REDIR_BACKUP, sa.xdpCount(NPF_STAT_REDIR_BACKUP)}}))
        << "tenant A";
    EXPECT_EQ(sa.reached(), kOkA + kRnrA);
    EXPECT_EQ(sa.claimed(), kOkA);
    EXPECT_EQ(sa.completedOk, kOkA);
    EXPECT_TRUE(xdpExactly(sb, {{NPF_STAT_REDIR_PRIMARY, sb.xdpCount(NPF_STAT_REDIR_PRIMARY)},
                                {NPF_STAT_REDIR_BACKUP, sb.xdpCount(NPF_STAT_REDIR_BACKUP)}}))
        << "tenant B: none of A's drops";
    EXPECT_EQ(sb.reached(), kOkB);
    EXPECT_EQ(sb.claimed(), kOkB);
    EXPECT_EQ(sb.completedOk, kOkB);
    EXPECT_EQ(sb.droppedInXdp(), 0u);

    // npfd's metrics: each flow's series with its own client's labels.
    {
        const std::string body = httpGet(rig, mport);
        const Scrape m = parse(body);
        ASSERT_TRUE(m.errors.empty()) << ::testing::PrintToString(m.errors);
        auto labels = [&](uint16_t port, const char* client, uid_t uid) {
            return "{iface=\"" + rig.rxIf() + "\",port=\"" + std::to_string(port) + "\",client=\"" + client +
                   "\",uid=\"" + std::to_string(uid) + "\",";
        };
        const std::string la = labels(portA, "tenant-a", kNobody), lb = labels(portB, "tenant-b", kVictimUid);
        for (const char* r : {"drop_rnr", "drop_bad_desc", "drop_contended", "drop_csum", "redir_fail", "socket"}) {
            const std::string reason = std::string("reason=\"") + r + "\"}";
            EXPECT_EQ(m.at("npf_flow_dropped_total" + la + reason), std::string(r) == "drop_rnr" ? kRnrA : 0)
                << r << "\n" << body;
            EXPECT_EQ(m.at("npf_flow_dropped_total" + lb + reason), 0) << r << "\n" << body;
        }
        for (const char* r : {"pass_bad_queue", "pass_no_socket", "pass_too_big", "pass_meta_fail"}) {
            const std::string reason = std::string("reason=\"") + r + "\"}";
            EXPECT_EQ(m.at("npf_flow_passed_total" + la + reason), 0) << r;
            EXPECT_EQ(m.at("npf_flow_passed_total" + lb + reason), 0) << r;
        }
        EXPECT_EQ(m.at("npf_flow_completed_total" + la + "status=\"ok\"}"), kOkA);
        EXPECT_EQ(m.at("npf_flow_completed_total" + lb + "status=\"ok\"}"), kOkB);
        EXPECT_EQ(m.at("npf_clients"), 2);
    }

    // Tenant A speaking the protocol itself, with a flow of its own: its own
    // flow's numbers, and no_flow (the same words) for every other id: B's,
    // its other connection's, one out of range, its own once closed.
    Hostile raw(npfd, "tenant-a-raw", kNobody);
    raw.region(1 << 20, 1 << 20);
    HostileFlow own = raw.openFlow(kFirstPort + 31);
    const FlowStats mine = counters::parseFlowStats(raw.ch.call(ipc::FlowStatsRequest{own.id}).reply.stats);
    EXPECT_EQ(mine, FlowStats{}) << "a flow that got nothing";
    for (uint32_t other : {fb.id(), fa.id(), uint32_t(NPF_MAX_FLOWS) + 7, ~0u}) {
        ipc::ErrorCode code = ipc::ErrorCode::Internal;
        EXPECT_EQ(refusal(raw.ch, other, &code), "no flow " + std::to_string(other) + " on this connection")
            << "flow " << other;
        EXPECT_EQ(code, ipc::ErrorCode::NoFlow) << "flow " << other;
    }
    (void)raw.ch.call(ipc::CloseFlowRequest{own.id});
    ipc::ErrorCode code = ipc::ErrorCode::Internal;
    EXPECT_EQ(refusal(raw.ch, own.id, &code), "no flow " + std::to_string(own.id) + " on this connection");
    EXPECT_EQ(code, ipc::ErrorCode::NoFlow);
    EXPECT_TRUE(raw.leave()) << "no_flow does not end the connection";

    // Nothing moved for either tenant meanwhile.
    EXPECT_EQ(fa.stats(), sa);
    EXPECT_EQ(fb.stats(), sb);
}

} // namespace
} // namespace npf::e2e
