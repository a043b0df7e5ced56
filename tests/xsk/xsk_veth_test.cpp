// AF_XDP layer against the real npf_xdp program on a veth pair in two
// namespaces: steering to primary/backup sockets, meta fields, payload bytes,
// frame recycling from two threads, counters that add up, two RX queues.
#include <gtest/gtest.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "ipc/unix_socket.h"
#include "sys/log.h"
#include "xsk/handover.h"
#include "xsk/payload.h"
#include "xsk/sizing.h"
#include "wait.h"
#include "xsk_rig.h"

namespace npf::test {
namespace {

using namespace std::chrono_literals;
using xsk::QueueStats;
using xsk::RxPacket;

struct Rec {
    bool backup;
    uint32_t queue;
    npf_meta meta;
    std::vector<uint8_t> payload;
};

// Polls both rings of every queue from the calling thread into `out` until
// `done()` holds (then one more sweep, so a surplus already on a ring shows
// up too) or kDeadline passed. Backup frames are released at once.
template <class Done>
void pump(Rig& rig, std::vector<Rec>& out, Done&& done)
{
    auto sweep = [&] {
        uint32_t got = 0;
        for (int q = 0; q < rig.queueCount(); q++) {
            auto& qs = rig.queue(q);
            got += qs.pollPrimary(xsk::kMaxBatch, [&](const RxPacket& p) noexcept {
                out.push_back({false, p.queue, p.meta, {p.payload, p.payload + p.meta.len}});
            });
            got += qs.peekBackup(xsk::kMaxBatch, [&](const RxPacket& p) noexcept {
                out.push_back({true, p.queue, p.meta, {p.payload, p.payload + p.meta.len}});
                qs.releaseBackup(p.frame);
            });
        }
        return got;
    };
    waitUntil([&] {
        while (sweep()) {
        }
        return done();
    }, kDeadline, 100us);
    while (sweep()) {
    }
}

// The packets that arrive until there are `want` of them (or kDeadline passed).
std::vector<Rec> collect(Rig& rig, size_t want)
{
    std::vector<Rec> out;
    pump(rig, out, [&] { return out.size() >= want; });
    return out;
}

void expectNoKernelDrops(const QueueStats& s)
{
    for (const xdp_statistics* k : {&s.kernelPrimary, &s.kernelBackup}) {
        EXPECT_EQ(k->rx_dropped, 0u);
        EXPECT_EQ(k->rx_ring_full, 0u);
        EXPECT_EQ(k->rx_invalid_descs, 0u);
    }
}

class XskVeth : public ::testing::TestWithParam<uint32_t> {
protected:
    void SetUp() override
    {
        if (!isRoot())
            GTEST_SKIP() << "needs root (netns, XDP attach, AF_XDP)";
        if (std::getenv("NPF_VERBOSE"))
            log::setLevel(log::Level::Debug);
    }
};

std::string modeName(const ::testing::TestParamInfo<uint32_t>& i)
{
    return (i.param & XDP_FLAGS_SKB_MODE) ? "skb" : "native";
}

// Buffers on page i (some cross into page i + 1), pages with page % 3 == 2
// not resident: each datagram must land on the ring its pages dictate, with
// the meta XDP computed and its bytes intact.
TEST_P(XskVeth, SteersByResidencyWithCorrectMetaAndBytes)
{
    Rig rig({.xdpFlags = GetParam()});
    auto& qs = rig.queue(0);
    EXPECT_FALSE(qs.zeroCopy()) << "veth has no zero-copy AF_XDP";
    constexpr uint32_t kN = 96;
    auto offsetOf = [](uint32_t i) -> uint64_t { return uint64_t(i) * 4096 + (i % 5 == 4 ? 4000 : (i % 7) * 16); };
    auto bufLen = [](uint32_t i) -> uint32_t { return i % 10 == 9 ? 100 : 2048; };
    auto sizeOf = [](uint32_t i) -> size_t { return 1 + (size_t(i) * 97) % 1472; };
    auto resident = [](uint64_t page) { return page % 3 != 2; };
    for (uint32_t i = 0; i < kN; i++)
        rig.post(offsetOf(i), bufLen(i));
    for (uint64_t p = 0; p < kN + 2; p++)
        rig.setResident(p, resident(p));

    std::vector<std::vector<uint8_t>> payloads;
    for (uint32_t i = 0; i < kN; i++)
        payloads.push_back(payloadFor(i, sizeOf(i)));
    ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, payloads), kN);
    std::vector<Rec> recs = collect(rig, kN);
    ASSERT_EQ(recs.size(), kN);

    uint32_t lastSeq[2] = {0, 0};
    bool first[2] = {true, true};
    size_t nBackup = 0;
    for (const Rec& r : recs) {
        uint32_t i = r.meta.seq;
        ASSERT_LT(i, kN);
        SCOPED_TRACE("seq " + std::to_string(i));
        uint32_t len = uint32_t(std::min<size_t>(sizeOf(i), bufLen(i)));
        bool allResident = true;
        for (uint64_t p = offsetOf(i) / 4096; p <= (offsetOf(i) + len - 1) / 4096; p++)
            allResident &= resident(p);
        EXPECT_EQ(r.backup, !allResident);
        EXPECT_EQ(r.meta.flow, 0u);
        EXPECT_EQ(r.meta.offset, offsetOf(i));
        EXPECT_EQ(r.meta.len, len);
        EXPECT_EQ(r.meta.payload_off, 42u); // Ethernet + IPv4 + UDP
        EXPECT_EQ(r.meta.flags, (allResident ? 0 : NPF_META_F_BACKUP) |
                                    (sizeOf(i) > bufLen(i) ? NPF_META_F_TRUNCATED : 0));
        EXPECT_EQ(xsk::stamped(r.meta), !allResident || r.meta.seq % NPF_FAST_STAMP_EVERY == 0);
        EXPECT_EQ(r.queue, 0u);
        EXPECT_TRUE(std::equal(r.payload.begin(), r.payload.end(), payloads[i].begin()));
        // Each ring delivers in seq order.
        int ring = r.backup ? 1 : 0;
        if (!first[ring]) {
            EXPECT_GT(i, lastSeq[ring]);
        }
        first[ring] = false;
        lastSeq[ring] = i;
        nBackup += r.backup;
    }
    EXPECT_GT(nBackup, 0u);
    EXPECT_LT(nBackup, kN);
    QueueStats s = qs.stats();
    EXPECT_EQ(s.rxPrimary, kN - nBackup);
    EXPECT_EQ(s.rxBackup, nBackup);
    EXPECT_EQ(s.badMeta(), 0u);
    EXPECT_EQ(s.backupHeld, 0u);
    EXPECT_EQ(s.recycled, kN);
    expectNoKernelDrops(s);
    EXPECT_EQ(rig.xdpStat(NPF_STAT_REDIR_PRIMARY), kN - nBackup);
    EXPECT_EQ(rig.xdpStat(NPF_STAT_REDIR_BACKUP), nBackup);
}

// A worker thread on the primary ring and a pager thread on the backup ring
// that holds frames for a while, both recycling into the one fill ring of a
// 64-frame UMEM, across 47x more datagrams than frames: nothing leaks,
// nothing is dropped, every datagram arrives once with its bytes.
TEST_P(XskVeth, WorkerAndPagerRecycleWithoutLeaks)
{
    RigOptions opt{.xdpFlags = GetParam()};
    opt.umem.frameCount = 64;
    opt.rxSize = 64;
    Rig rig(opt);
    auto& qs = rig.queue(0);
    constexpr uint32_t kN = 3000;
    auto sizeOf = [](uint32_t i) -> size_t { return 1 + (size_t(i) * 131) % 1472; };
    for (uint32_t i = 0; i < kN; i++) {
        rig.post(uint64_t(i) * 4096, 1472);
        rig.setResident(i, i % 2 == 0);
    }
    std::vector<std::vector<uint8_t>> payloads;
    for (uint32_t i = 0; i < kN; i++)
        payloads.push_back(payloadFor(i, sizeOf(i)));

    std::vector<std::atomic<uint8_t>> seen(kN);
    std::atomic<uint64_t> received{0}, bad{0}, maxHeld{0};
    std::atomic<bool> stop{false};
    auto check = [&](const RxPacket& p, bool backup) noexcept {
        uint32_t i = p.meta.seq;
        if (i >= kN || (i % 2 == 1) != backup || p.meta.len != sizeOf(i) ||
            std::memcmp(p.payload, payloads[i].data(), p.meta.len) != 0)
            bad++;
        else
            seen[i]++;
    };
    std::thread worker([&] {
        while (!stop.load()) {
            uint32_t n = qs.pollPrimary(xsk::kMaxBatch, [&](const RxPacket& p) noexcept { check(p, false); });
            received += n;
            if (!n)
                qs.waitPrimary(5);
        }
    });
    std::thread pager([&] {
        std::vector<uint64_t> held;
        while (!stop.load()) {
            uint32_t n = qs.peekBackup(8, [&](const RxPacket& p) noexcept {
                check(p, true);
                held.push_back(p.frame);
            });
            maxHeld = std::max<uint64_t>(maxHeld, qs.heldBackup());
            // Hold frames across batches, as a pager waiting on a fault would.
            if (held.size() >= 24 || (n == 0 && !held.empty())) {
                qs.releaseBackup(held.data(), uint32_t(held.size()));
                received += held.size();
                held.clear();
            }
            if (!n)
                std::this_thread::sleep_for(200us);
        }
        qs.releaseBackup(held.data(), uint32_t(held.size()));
    });
    size_t sent = 0;
    EXPECT_NO_THROW(sent = sendDatagrams(rig.veth(), rig.port(), 0, payloads, 16, &received));
    EXPECT_TRUE(waitUntil([&] { return received.load() >= kN; })) << received.load() << " of " << kN;
    stop = true;
    worker.join();
    pager.join();

    EXPECT_EQ(sent, kN);
    EXPECT_EQ(received.load(), kN);
    EXPECT_EQ(bad.load(), 0u);
    size_t once = 0;
    for (auto& s : seen)
        once += s.load() == 1;
    EXPECT_EQ(once, kN);
    EXPECT_GE(maxHeld.load(), 8u) << "the pager should have held frames across batches";
    QueueStats s = qs.stats();
    EXPECT_EQ(s.rxPrimary, kN / 2);
    EXPECT_EQ(s.rxBackup, kN / 2);
    EXPECT_EQ(s.backupHeld, 0u);
    EXPECT_EQ(s.recycled, kN);
    EXPECT_EQ(s.fillStashed, 0u);
    EXPECT_EQ(s.badMeta(), 0u);
    expectNoKernelDrops(s);
    EXPECT_EQ(s.kernelPrimary.rx_fill_ring_empty_descs, 0u);
}

// Unpaced stream: the worker reposts buffers as XDP consumes them (like a
// NIC RX ring), the pager releases backup frames at once. Whatever the veth
// or the rings drop, the counters add up: every datagram sent reached XDP or
// was dropped by the veth, and per socket XDP redirects == delivered + bad
// meta + kernel drops. The test waits until they do (nothing is in flight
// any more), not for the stream to go quiet. Prints the rate, asserts none.
TEST_P(XskVeth, UnpacedStreamCountersAddUp)
{
    Rig rig({.xdpFlags = GetParam()});
    auto& qs = rig.queue(0);
    constexpr uint32_t kN = 100000, kPages = 1024, kLen = 64;
    auto backupSeq = [](uint64_t seq) { return (seq % kPages) % 8 == 7; };
    for (uint64_t p = 0; p < kPages; p++)
        rig.setResident(p, p % 8 != 7);
    for (uint32_t i = 0; i < NPF_POST_RING_SIZE; i++)
        rig.post(uint64_t(i % kPages) * 4096, 1472);

    std::vector<std::atomic<uint8_t>> seen(kN);
    std::atomic<uint64_t> dup{0}, badPkt{0}, delivered{0};
    std::atomic<bool> stop{false};
    std::chrono::steady_clock::time_point t0{}, t1{};
    uint64_t workerPkts = 0;
    auto check = [&](const RxPacket& p, bool backup) noexcept {
        uint32_t id;
        std::memcpy(&id, p.payload, 4);
        if (p.meta.len != kLen || backupSeq(p.meta.seq) != backup || id >= kN ||
            std::memcmp(p.payload, payloadFor(id, kLen).data(), kLen) != 0)
            badPkt++;
        if (p.meta.seq >= seen.size() || seen[p.meta.seq]++ != 0)
            dup++;
        delivered++;
    };
    std::thread worker([&] {
        while (!stop.load()) {
            uint32_t k = qs.pollPrimary(xsk::kMaxBatch, [&](const RxPacket& p) noexcept { check(p, false); });
            if (k) {
                if (!workerPkts)
                    t0 = std::chrono::steady_clock::now();
                t1 = std::chrono::steady_clock::now();
                workerPkts += k;
            }
            // Keep the post ring full: the slot of seq s is free once XDP consumed s.
            for (uint64_t cons = rig.consumed(); rig.posted() < cons + NPF_POST_RING_SIZE;)
                rig.post((rig.posted() % kPages) * 4096, 1472);
            if (!k)
                qs.waitPrimary(1);
        }
    });
    std::thread pager([&] {
        while (!stop.load()) {
            if (!qs.peekBackup(xsk::kMaxBatch, [&](const RxPacket& p) noexcept {
                    check(p, true);
                    qs.releaseBackup(p.frame);
                }))
                std::this_thread::sleep_for(50us);
        }
    });
    std::vector<std::vector<uint8_t>> payloads;
    payloads.reserve(kN);
    for (uint32_t i = 0; i < kN; i++)
        payloads.push_back(payloadFor(i, kLen));
    auto s0 = std::chrono::steady_clock::now();
    const uint64_t txDropped0 = rig.txDropped();
    size_t sent = sendDatagrams(rig.veth(), rig.port(), 0, payloads);
    double sendSec = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    // Our datagrams never pass to the stack (a flow, sockets bound, 64 bytes):
    // XDP's pass counters hold only stray packets of the kernel's own.
    auto seenByXdp = [&] {
        uint64_t n = 0;
        for (uint32_t st = NPF_STAT_DROP_RNR; st <= NPF_STAT_REDIR_FAIL; st++)
            n += rig.xdpStat(st);
        return n;
    };
    auto settled = [&] {
        QueueStats q = qs.stats();
        return seenByXdp() + rig.txDropped() - txDropped0 == sent &&
               rig.xdpStat(NPF_STAT_REDIR_PRIMARY) ==
                   q.rxPrimary + q.kernelPrimary.rx_dropped + q.kernelPrimary.rx_ring_full &&
               rig.xdpStat(NPF_STAT_REDIR_BACKUP) ==
                   q.rxBackup + q.kernelBackup.rx_dropped + q.kernelBackup.rx_ring_full &&
               q.backupHeld == 0;
    };
    EXPECT_TRUE(waitUntil(settled, kDeadline, 1ms))
        << "not every datagram sent was accounted for: XDP saw " << seenByXdp() << ", the veth dropped "
        << rig.txDropped() - txDropped0 << " of " << sent;
    stop = true;
    worker.join();
    pager.join();

    QueueStats s = qs.stats();
    uint64_t redirPrimary = rig.xdpStat(NPF_STAT_REDIR_PRIMARY), redirBackup = rig.xdpStat(NPF_STAT_REDIR_BACKUP);
    EXPECT_EQ(sent, kN);
    EXPECT_EQ(dup.load(), 0u);
    EXPECT_EQ(badPkt.load(), 0u);
    EXPECT_EQ(s.badMeta(), 0u);
    EXPECT_EQ(s.backupHeld, 0u);
    EXPECT_EQ(s.fillStashed, 0u);
    EXPECT_EQ(delivered.load(), s.rxPrimary + s.rxBackup);
    EXPECT_EQ(s.recycled, s.rxPrimary + s.rxBackup);
    EXPECT_EQ(redirPrimary, s.rxPrimary + s.kernelPrimary.rx_dropped + s.kernelPrimary.rx_ring_full);
    EXPECT_EQ(redirBackup, s.rxBackup + s.kernelBackup.rx_dropped + s.kernelBackup.rx_ring_full);
    uint64_t xdpTotal = rig.xdpStat(NPF_STAT_RX_TOTAL);
    EXPECT_LE(xdpTotal, kN + 16) << "XDP saw more than was sent (a few stray packets at most)";
    EXPECT_EQ(rig.xdpStat(NPF_STAT_REDIR_FAIL), 0u);
    EXPECT_GT(s.rxBackup, 0u);
    EXPECT_EQ(seenByXdp() + rig.txDropped() - txDropped0, sent);
    EXPECT_GT(s.rxPrimary, 0u);

    double sec = std::chrono::duration<double>(t1 - t0).count();
    std::printf("[ rate     ] %s: sent %zu in %.3f s (%.0f pps); worker %llu primary pkts in %.3f s = %.0f pps; "
                "backup %llu; xdp saw %llu, rnr %llu; kernel drops primary %llu/%llu backup %llu/%llu "
                "(dropped/ring full); fill empty %llu\n",
                modeName({GetParam(), 0}).c_str(), sent, sendSec, sent / sendSec,
                (unsigned long long)workerPkts, sec, sec > 0 ? workerPkts / sec : 0.0,
                (unsigned long long)s.rxBackup, (unsigned long long)xdpTotal,
                (unsigned long long)rig.xdpStat(NPF_STAT_DROP_RNR),
                (unsigned long long)s.kernelPrimary.rx_dropped, (unsigned long long)s.kernelPrimary.rx_ring_full,
                (unsigned long long)s.kernelBackup.rx_dropped, (unsigned long long)s.kernelBackup.rx_ring_full,
                (unsigned long long)s.kernelPrimary.rx_fill_ring_empty_descs);
    RecordProperty("worker_pps", std::to_string(sec > 0 ? uint64_t(workerPkts / sec) : 0));
}

TEST_P(XskVeth, WorkerDrainsANearlyFullRing)
{
    Rig rig({.xdpFlags = GetParam()});
    auto& qs = rig.queue(0);
    constexpr uint32_t kN = 2000, kLen = 1024;
    for (uint32_t i = 0; i < kN; i++) {
        rig.post(uint64_t(i % 512) * 4096, kLen);
        rig.setResident(i % 512, true);
    }
    std::vector<std::vector<uint8_t>> payloads;
    for (uint32_t i = 0; i < kN; i++)
        payloads.push_back(payloadFor(i, kLen));
    ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, payloads), kN);
    waitUntil([&] { return qs.primaryBacklog() >= kN; });
    ASSERT_EQ(qs.primaryBacklog(), kN) << "datagrams lost before the ring";

    std::vector<uint8_t> region(512 * 4096);
    uint64_t bad = 0, got = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (got < kN) {
        uint32_t n = qs.pollPrimary(xsk::kMaxBatch, [&](const RxPacket& p) noexcept {
            std::memcpy(region.data() + p.meta.offset, p.payload, p.meta.len);
            bad += std::memcmp(region.data() + p.meta.offset, payloads[p.meta.seq].data(), kLen) != 0;
        });
        if (!n)
            break;
        got += n;
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(got, kN);
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(qs.primaryBacklog(), 0u);
    expectNoKernelDrops(qs.stats());
    std::printf("[ drain    ] %s: %llu x %u B frames validated + copied in %.1f us = %.2f Mpps\n",
                modeName({GetParam(), 0}).c_str(), (unsigned long long)got, kLen, sec * 1e6, got / sec / 1e6);
}

// The worker's view of open flows lags or disagrees with XDP's: frames of a
// flow the service does not know are counted as bad metas on the ring they
// came from, never handed to the sink, and their frames are recycled.
TEST_P(XskVeth, FramesOfAnUnknownFlowAreCountedAndRecycled)
{
    Rig rig({.xdpFlags = GetParam()});
    auto& qs = rig.queue(0);
    constexpr uint32_t kN = 40;
    for (uint32_t i = 0; i < kN; i++) {
        rig.post(uint64_t(i) * 4096, 1472);
        rig.setResident(i, i % 2 == 0);
    }
    rig.flows().close(0); // still in npf_flows: XDP keeps steering
    std::vector<std::vector<uint8_t>> payloads;
    for (uint32_t i = 0; i < kN; i++)
        payloads.push_back(payloadFor(i, 200));
    ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, payloads), kN);
    std::vector<Rec> recs;
    pump(rig, recs, [&] { return qs.stats().badMeta() >= kN; });
    EXPECT_TRUE(recs.empty()) << recs.size() << " frames of an unknown flow delivered";
    QueueStats s = qs.stats();
    EXPECT_EQ(s.badMetaPrimary[size_t(xsk::MetaStatus::UnknownFlow)], kN / 2);
    EXPECT_EQ(s.badMetaBackup[size_t(xsk::MetaStatus::UnknownFlow)], kN / 2);
    EXPECT_EQ(s.badMeta(), kN);
    EXPECT_EQ(s.rxPrimary + s.rxBackup, 0u);
    EXPECT_EQ(s.backupHeld, 0u);
    EXPECT_EQ(s.recycled, kN);

    rig.flows().open(0);
    for (uint32_t i = 0; i < kN; i++)
        rig.post(uint64_t(i) * 4096, 1472);
    ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, payloads), kN);
    EXPECT_EQ(collect(rig, kN).size(), kN);
}

// Closing the sockets empties their XSKMAP slots: XDP fails open to the
// kernel stack without claiming posted buffers.
TEST_P(XskVeth, ClosedSocketsLeaveTheirSlotsAndTrafficFailsOpen)
{
    Rig rig({.xdpFlags = GetParam()});
    constexpr uint32_t kN = 10;
    for (uint32_t i = 0; i < 2 * kN; i++) {
        rig.post(uint64_t(i) * 4096, 1472);
        rig.setResident(i, true);
    }
    std::vector<std::vector<uint8_t>> payloads;
    for (uint32_t i = 0; i < kN; i++)
        payloads.push_back(payloadFor(i, 64));
    ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, payloads), kN);
    ASSERT_EQ(collect(rig, kN).size(), kN);
    ASSERT_EQ(rig.consumed(), kN);
    rig.closeSockets();
    ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, payloads), kN);
    waitUntil([&] { return rig.xdpStat(NPF_STAT_PASS_NO_SOCKET) >= kN; });
    EXPECT_EQ(rig.xdpStat(NPF_STAT_PASS_NO_SOCKET), kN);
    EXPECT_EQ(rig.consumed(), kN) << "no post may be claimed without sockets";
}

// Forcing zero-copy on veth fails with EOPNOTSUPP and a message that says
// what to do; copy and auto modes bind in copy mode; a second pair on a
// bound queue is refused; a bad UMEM geometry is rejected before any bind.
TEST_P(XskVeth, BindModesAndBadGeometry)
{
    Rig rig({.xdpFlags = GetParam(), .sockets = false});
    xsk::FlowSet flows;
    auto make = [&](auto edit) {
        return inNetns(rig.veth().rxNs(), [&] {
            xsk::QueueConfig qc;
            qc.ifindex = rig.ifindex();
            qc.umem.frameCount = 64;
            qc.primaryRxSize = qc.backupRxSize = 64;
            qc.regionBytes = rig.regionBytes();
            edit(qc);
            return std::make_unique<xsk::QueueSockets>(qc, flows, rig.xskmapFd());
        });
    };
    try {
        make([](xsk::QueueConfig& c) { c.mode = xsk::BindMode::ZeroCopy; });
        FAIL() << "zero-copy bind on veth succeeded";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EOPNOTSUPP) << e.what();
        EXPECT_NE(std::string(e.what()).find("use copy mode"), std::string::npos) << e.what();
    }
    // Each iteration binds right after the previous pair closed: the kernel
    // frees the queue asynchronously, so this also covers the EBUSY wait.
    for (xsk::BindMode m : {xsk::BindMode::Copy, xsk::BindMode::Auto, xsk::BindMode::Copy}) {
        auto q = make([&](xsk::QueueConfig& c) { c.mode = m; });
        EXPECT_FALSE(q->zeroCopy());
        try {
            make([&](xsk::QueueConfig& c) {
                c.mode = m;
                c.busyWaitMs = 50;
            });
            ADD_FAILURE() << "second UMEM on a bound queue accepted";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code().value(), EBUSY) << e.what();
            EXPECT_NE(std::string(e.what()).find("owns this queue"), std::string::npos) << e.what();
        }
    }
    for (auto [fs, fc, fill] : {std::tuple{1000u, 64u, 0u}, {8192u, 64u, 0u}, {4096u, 0u, 0u}, {4096u, 64u, 64u},
                                {4096u, 64u, 100u}}) {
        SCOPED_TRACE(std::to_string(fs) + "/" + std::to_string(fc) + "/" + std::to_string(fill));
        try {
            make([&](xsk::QueueConfig& c) {
                c.umem.frameSize = fs;
                c.umem.frameCount = fc;
                c.umem.fillSize = fill;
            });
            ADD_FAILURE() << "accepted";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code().value(), EINVAL) << e.what();
            EXPECT_NE(std::string(e.what()).find("UMEM of"), std::string::npos) << e.what();
        }
    }
}

// Two RX queues: the veth RX queue is the sender's TX queue, which the
// kernel picks per socket from its flow hash. Senders on distinct source
// ports until both queues have been hit; each socket's datagrams must all
// land on one queue, on that queue's sockets, with the right bytes.
TEST_P(XskVeth, TwoQueuesSendersLandOnTheirQueueSockets)
{
    if (GetParam() & XDP_FLAGS_SKB_MODE)
        GTEST_SKIP() << "generic XDP on veth sees every packet on rx queue 0 (measured on 6.18, GRO on or off), "
                        "so only queue 0's sockets can receive";
    Rig rig({.queues = 2, .xdpFlags = GetParam()});
    constexpr uint32_t kPerSocket = 8, kMaxSockets = 48;
    for (uint32_t i = 0; i < kPerSocket * kMaxSockets; i++) {
        rig.post(uint64_t(i) * 4096, 1472);
        rig.setResident(i, i % 4 != 3);
    }
    std::vector<int> socketQueue;
    size_t perQueue[2] = {0, 0};
    std::vector<uint8_t> seqSeen(kPerSocket * kMaxSockets);
    for (uint32_t k = 0; k < kMaxSockets && !(perQueue[0] && perQueue[1]); k++) {
        std::vector<std::vector<uint8_t>> payloads;
        for (uint32_t j = 0; j < kPerSocket; j++)
            payloads.push_back(payloadFor(k * kPerSocket + j, 100 + j));
        ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), uint16_t(41000 + k), payloads), kPerSocket);
        std::vector<Rec> recs = collect(rig, kPerSocket);
        ASSERT_EQ(recs.size(), kPerSocket) << "socket " << k;
        int q = int(recs[0].queue);
        for (const Rec& r : recs) {
            uint32_t id;
            std::memcpy(&id, r.payload.data(), 4);
            ASSERT_EQ(id / kPerSocket, k);
            EXPECT_EQ(int(r.queue), q) << "one socket's datagrams must stay on one queue";
            EXPECT_TRUE(r.payload == payloads[id % kPerSocket]);
            ASSERT_LT(r.meta.seq, seqSeen.size());
            EXPECT_EQ(seqSeen[r.meta.seq]++, 0) << "seq " << r.meta.seq << " twice";
            EXPECT_EQ(r.backup, r.meta.seq % 4 == 3);
        }
        socketQueue.push_back(q);
        perQueue[q]++;
    }
    ASSERT_TRUE(perQueue[0] && perQueue[1]) << "all " << socketQueue.size()
                                            << " sender sockets hashed to one TX queue";
    for (int q = 0; q < 2; q++) {
        QueueStats s = rig.queue(q).stats();
        EXPECT_EQ(s.rxPrimary + s.rxBackup, perQueue[q] * kPerSocket) << "queue " << q;
        EXPECT_EQ(s.badMeta(), 0u);
        expectNoKernelDrops(s);
    }
    std::printf("[ queues   ] %zu sender sockets: %zu on queue 0, %zu on queue 1\n", socketQueue.size(), perQueue[0],
                perQueue[1]);
}

// Jumbo frames (MTU 9000): a datagram larger than a UMEM frame arrives as
// several RX descriptors (XDP_USE_SG), the first starting with the meta. With
// 2 KiB and 4 KiB frames, payloads around every frame border up to 8972
// bytes (the most an MTU of 9000 carries over IPv4), on both rings: the
// pieces gather to the bytes sent, the checksum over all of them holds (also
// for a truncated datagram's unplaced tail), every frame comes back, and
// packets of an unknown flow give back all their frames.
TEST_P(XskVeth, JumboDatagramsSpanFramesAndGatherWhole)
{
    for (uint32_t frameSize : {2048u, 4096u}) {
        SCOPED_TRACE("frame size " + std::to_string(frameSize));
        Rig rig({.xdpFlags = GetParam(), .umem = {.frameSize = frameSize, .frameCount = 256}, .rxSize = 256,
                 .mtu = 9000});
        auto& qs = rig.queue(0);
        ASSERT_TRUE(qs.multiBuffer()) << "XDP_USE_SG refused: this kernel cannot deliver jumbo frames";
        // In front of the payload: npf_meta, Ethernet, IPv4, UDP.
        const uint32_t cap = xsk::frameCapacity(frameSize), off = sizeof(npf_meta) + 42;
        std::vector<uint32_t> sizes{1, 64, 1472, 8972, 8971, 5000, 3400};
        for (uint32_t k = 1; k * cap < 9000 + 14; k++)
            for (int d : {-1, 0, 1})
                sizes.push_back(k * cap - off + d); // the payload ends right at a frame border, or one byte around it
        const uint32_t n = uint32_t(sizes.size()) + 1;
        constexpr uint32_t kTruncAt = 5000; // the last datagram: 8972 bytes into a 5000-byte buffer
        sizes.push_back(8972);
        auto offsetOf = [](uint32_t i) -> uint64_t { return uint64_t(i) * 4 * 4096 + (i * 1237) % 4096; };
        for (uint32_t i = 0; i < n; i++) {
            rig.post(offsetOf(i), i + 1 == n ? kTruncAt : 9216);
            for (uint64_t p = offsetOf(i) / 4096; p <= (offsetOf(i) + 9216) / 4096; p++)
                rig.setResident(p, i % 3 != 1); // every third datagram to the backup ring
        }
        std::vector<std::vector<uint8_t>> payloads;
        for (uint32_t i = 0; i < n; i++)
            payloads.push_back(payloadFor(i, sizes[i]));
        ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, payloads), n);

        uint32_t got = 0, descs = 0, backup = 0;
        std::vector<uint8_t> buf(NPF_MAX_PAYLOAD);
        auto check = [&](const RxPacket& p, bool fromBackup) {
            const uint32_t i = p.meta.seq;
            ASSERT_LT(i, n);
            SCOPED_TRACE("datagram " + std::to_string(i) + " of " + std::to_string(sizes[i]) + " bytes");
            const uint32_t want = std::min(sizes[i], i + 1 == n ? kTruncAt : 9216u);
            EXPECT_EQ(p.meta.len, want);
            EXPECT_EQ(p.tail, sizes[i] - want);
            EXPECT_EQ(p.nframes, (off + sizes[i] + cap - 1) / cap) << "descriptors of one packet";
            EXPECT_EQ(p.frames[0], p.frame);
            EXPECT_EQ(fromBackup, i % 3 == 1);
            const uint64_t sum = xsk::copyPlaced(buf.data(), p, true);
            EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + want, payloads[i].begin())) << "gathered bytes differ";
            EXPECT_TRUE(xsk::csumHolds(p, sum)) << "UDP checksum over every frame";
            EXPECT_EQ(xsk::sumPayload(p, 0, want), sum);
            got++;
            descs += p.nframes;
            backup += fromBackup;
        };
        waitUntil([&] {
            // Small batches: a packet cut off by the batch must wait for the next poll.
            while (qs.pollPrimary(7, [&](const RxPacket& p) noexcept { check(p, false); }) +
                   qs.peekBackup(5, [&](const RxPacket& p) noexcept {
                       check(p, true);
                       qs.releaseBackup(p.frames.data(), p.nframes);
                   })) {
            }
            return got >= n;
        }, kDeadline, 100us);
        ASSERT_EQ(got, n);
        QueueStats s = qs.stats();
        EXPECT_EQ(s.badMeta(), 0u);
        EXPECT_EQ(s.backupHeld, 0u);
        EXPECT_EQ(s.rxBackup, backup);
        EXPECT_EQ(s.recycled, descs) << "every frame of every packet back on the fill ring";
        EXPECT_GT(descs, n) << "no datagram spanned frames";
        expectNoKernelDrops(s);

        // Unknown flow: counted once per packet, every frame recycled.
        rig.flows().close(0);
        for (uint32_t i = 0; i < 6; i++)
            rig.post(offsetOf(n + i), 9216);
        std::vector<std::vector<uint8_t>> jumbo(6, payloadFor(7, 8972));
        ASSERT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, jumbo), 6u);
        auto delivered = [&](const RxPacket&) noexcept { ADD_FAILURE() << "unknown flow delivered"; };
        waitUntil([&] {
            qs.pollPrimary(xsk::kMaxBatch, delivered);
            qs.peekBackup(xsk::kMaxBatch, delivered);
            return qs.stats().badMeta() >= 6;
        }, kDeadline, 100us);
        s = qs.stats();
        EXPECT_EQ(s.badMeta(), 6u);
        EXPECT_EQ(s.recycled, descs + 6 * ((off + 8972 + cap - 1) / cap));
        EXPECT_EQ(s.backupHeld, 0u);
    }
}

// npfd's delegated mode, the AF_XDP layer: a privileged process makes a
// queue's sockets over a sealed memfd UMEM and hands the three descriptors
// over a Unix socket to a process with no capability (uid nobody), which
// runs the queue: every datagram arrives on the ring its pages dictate,
// byte for byte, and every frame comes back to the fill ring. The receiving
// process can neither write the frames nor make an AF_XDP socket itself.
TEST_P(XskVeth, AQueueHandedOverRunsInAProcessWithoutPrivileges)
{
    Rig rig({.xdpFlags = GetParam(), .sockets = false});
    constexpr uint32_t kN = 300, kFirst = 200; // two rounds through 256 frames
    auto resident = [](uint64_t page) { return page % 4 != 3; };
    for (uint32_t i = 0; i < kN; i++) {
        rig.post(uint64_t(i) * 4096, 2048);
        rig.setResident(i, resident(i));
    }
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    Fd parentEnd(sv[0]), childEnd(sv[1]);
    xsk::QueueConfig qc;
    qc.ifindex = rig.ifindex();
    qc.queue = 0;
    qc.umem.frameCount = 256; // fewer frames than datagrams: they must come back
    qc.primaryRxSize = qc.backupRxSize = 512;
    qc.regionBytes = rig.regionBytes();

    // The child: drops to nobody, receives the descriptors, runs the queue.
    // Its verdict is one line on the socket ("ok <primary> <backup>", or what failed).
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        parentEnd.reset();
        auto say = [&](const std::string& line) {
            (void)ipc::sendMessage(childEnd.get(), line);
            ::_exit(0);
        };
        if (::setgroups(0, nullptr) || ::setgid(65534) || ::setuid(65534))
            say("setuid failed");
        if (Fd probe(::socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0)); probe || errno != EPERM)
            say("the child could make an AF_XDP socket: it is not unprivileged");
        try {
            ipc::RecvResult r = ipc::recvMessage(childEnd.get());
            if (r.status != ipc::IoStatus::Ok || r.message.fds.size() != 3)
                say("no handover");
            if (::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, r.message.fds[0].get(), 0) != MAP_FAILED)
                say("the frames could be mapped writable");
            xsk::QueueSockets qs(xsk::Adopt{}, qc, rig.flows(), std::move(r.message.fds[0]),
                                 std::move(r.message.fds[1]), std::move(r.message.fds[2]));
            (void)ipc::sendMessage(childEnd.get(), "ready");
            uint32_t got[2] = {0, 0};
            std::string bad;
            auto check = [&](const RxPacket& p, bool backup) {
                const uint32_t i = p.meta.seq;
                if (i >= kN || p.meta.len != 1000 || backup == resident(i) ||
                    !std::equal(p.payload, p.payload + p.meta.len, payloadFor(i, 1000).begin()))
                    bad = "datagram " + std::to_string(i) + " wrong";
                got[backup]++;
            };
            const auto deadline = std::chrono::steady_clock::now() + kDeadline;
            auto receiveUntil = [&](uint32_t n) {
                while (got[0] + got[1] < n && std::chrono::steady_clock::now() < deadline) {
                    qs.pollPrimary(xsk::kMaxBatch, [&](const RxPacket& p) noexcept { check(p, false); });
                    qs.peekBackup(xsk::kMaxBatch, [&](const RxPacket& p) noexcept {
                        check(p, true);
                        qs.releaseBackup(p.frames.data(), p.nframes);
                    });
                    (void)qs.waitPrimary(1);
                }
            };
            // The second round fits the UMEM only in the frames the first gave back.
            receiveUntil(kFirst);
            (void)ipc::sendMessage(childEnd.get(), "first round in");
            receiveUntil(kN);
            const QueueStats s = qs.stats();
            if (s.recycled != kN)
                bad += " recycled " + std::to_string(s.recycled);
            say(bad.empty() ? "ok " + std::to_string(got[0]) + " " + std::to_string(got[1]) : bad);
        } catch (const std::exception& e) {
            say(std::string("threw: ") + e.what());
        }
    }
    childEnd.reset();
    auto reap = [&] {
        int status = 0;
        ::waitpid(pid, &status, 0);
        return status;
    };
    std::optional<xsk::DelegatedQueue> dq;
    try {
        inNetns(rig.veth().rxNs(), [&] { dq.emplace(qc, rig.xskmapFd()); });
    } catch (...) {
        ::kill(pid, SIGKILL);
        reap();
        throw;
    }
    EXPECT_FALSE(dq->config().umem.frameCount == 0);
    const int fds[3] = {dq->umemFd(), dq->primaryFd(), dq->backupFd()};
    ASSERT_EQ(ipc::sendMessage(parentEnd.get(), "queue 0", fds), ipc::IoStatus::Ok);
    ipc::RecvResult ready = ipc::recvMessage(parentEnd.get());
    ASSERT_EQ(ready.status, ipc::IoStatus::Ok);
    ASSERT_EQ(ready.message.bytes, "ready");
    // Two rounds, each within the frames the child has on its fill ring: the
    // second is sent once the child has the first (however slowly it runs).
    std::vector<std::vector<uint8_t>> first, second;
    for (uint32_t i = 0; i < kN; i++)
        (i < kFirst ? first : second).push_back(payloadFor(i, 1000));
    EXPECT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, first), kFirst);
    ipc::RecvResult verdict = ipc::recvMessage(parentEnd.get());
    if (verdict.status == ipc::IoStatus::Ok && verdict.message.bytes == "first round in") {
        EXPECT_EQ(sendDatagrams(rig.veth(), rig.port(), 0, second), kN - kFirst);
        verdict = ipc::recvMessage(parentEnd.get());
    }
    EXPECT_EQ(WEXITSTATUS(reap()), 0);
    ASSERT_EQ(verdict.status, ipc::IoStatus::Ok);
    uint32_t backup = 0;
    for (uint32_t i = 0; i < kN; i++)
        backup += !resident(i);
    EXPECT_EQ(verdict.message.bytes, "ok " + std::to_string(kN - backup) + " " + std::to_string(backup));
    EXPECT_EQ(rig.xdpStat(NPF_STAT_REDIR_PRIMARY), kN - backup);
    EXPECT_EQ(rig.xdpStat(NPF_STAT_REDIR_BACKUP), backup);
    const xdp_statistics k = dq->primaryStats();
    EXPECT_EQ(k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs, 0u) << "the kernel saw what the child saw";
}

INSTANTIATE_TEST_SUITE_P(Modes, XskVeth, ::testing::Values(XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE), modeName);

} // namespace
} // namespace npf::test
