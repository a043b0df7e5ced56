// Every datagram of a flow is accounted to that flow (Flow::stats): XDP's
// outcomes for it, its completions, what is in flight -- exactly, with each
// kind of loss forced, and a second flow on the interface sees none of it.
#include <algorithm>
#include <vector>

#include "dataplane/stats.h"
#include "engine_fixture.h"
#include "packet_builder.h"

namespace npf::e2e {
namespace {

constexpr uint16_t kPort = 7300;
uint32_t size1000(uint32_t) { return 1000; }

// The application side of a flow without a Checker: buffers posted once and
// never again, completions tallied by status.
struct RawFlow {
    Flow& flow;
    CheckTotals polled;
    void poll()
    {
        npf_completion c[64];
        for (int n; (n = flow.poll(c)) > 0;)
            for (int i = 0; i < n; i++) {
                polled.completions++;
                switch (c[i].status) {
                case NPF_CS_OK: polled.ok++; break;
                case NPF_CS_TRUNCATED: polled.truncated++; break;
                case NPF_CS_LOST: polled.lost++; break;
                case NPF_CS_BAD_CSUM: polled.badCsum++; break;
                }
            }
    }
    // Polls until the flow's counters show `reached` datagrams and every
    // claimed one completed and polled; the stats then.
    FlowStats settle(uint64_t reached)
    {
        FlowStats f;
        test::waitUntil([&] {
            poll();
            f = flow.stats();
            return f.reached() >= reached && f.inFlight == 0 && f.completed() == polled.completions;
        });
        return f;
    }
};

// Flow A gets a datagram with a bad IPv4 header checksum (dropped in XDP),
// one with a wrong UDP checksum (claims a buffer, completes BAD_CSUM), then a
// burst bigger than its 32 posted buffers (the rest: drop_rnr). Flow B on the
// same interface receives a flow-controlled stream meanwhile. Each flow's
// stats hold exactly its own datagrams, and together they are what XDP
// counted on the interface.
TEST_F(EngineE2E, EveryDatagramOfAFlowIsAccountedToItsOwnFlow)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& a = eng->openFlow(kPort);
    Flow& b = eng->openFlow(kPort + 1);
    EXPECT_EQ(a.stats(), FlowStats{}) << "a new flow starts from zero";
    const Counters xdp0 = rig.xdp();
    const uint64_t veth0 = rig.vethDrops();

    constexpr uint32_t kPosted = 32, kBurst = 100, kStream = 300;
    for (uint32_t i = 0; i < kPosted; i++)
        ASSERT_TRUE(a.post(uint64_t(i) * 2048, 2048));
    a.flush();
    RawFlow ra{a, {}};
    test::EthSpec eth{.dst = test::macAddr(rig.veth().rxMac()), .src = test::macAddr(rig.veth().txMac())};
    test::Ipv4Spec ip{.src = test::ipv4Addr(rig.txAddr()), .dst = test::ipv4Addr(rig.rxAddr())};
    auto frame = [&](size_t flip) {
        auto f = test::PacketBuilder().eth(eth).ipv4(ip).udp({.sport = 40001, .dport = kPort}).payload(
            payloadFor(senderId(9, uint32_t(flip)), 700)).build();
        f[flip] ^= 0x5a;
        return f;
    };
    sendRaw(rig, frame(14 + 10)); // the IPv4 header checksum
    EXPECT_EQ(ra.settle(1).xdpCount(NPF_STAT_DROP_CSUM), 1u);
    sendRaw(rig, frame(14 + 20 + 6)); // the UDP checksum's high byte
    EXPECT_EQ(ra.settle(2).completedBadCsum, 1u);

    Checker chk(*eng, b, {.base = 8ull << 20, .stride = 2048, .slots = 2048, .depth = 256}, size1000);
    chk.postInitial();
    Stream tx(rig, chk, {.sender = 1, .count = kStream, .dstPort = uint16_t(kPort + 1), .size = size1000});
    ASSERT_EQ(sendDatagrams(rig.veth(), {.count = kBurst, .dstPort = kPort, .size = size1000}), "");
    ASSERT_EQ(tx.run(), "");
    const uint64_t veth = rig.vethDrops() - veth0; // before XDP: no socket drop is possible here
    const FlowStats fa = ra.settle(2 + kBurst - veth);
    EXPECT_TRUE(flowAccounted(fa, ra.polled, 2 + kBurst - veth));
    EXPECT_EQ(fa.claimed(), kPosted) << "every posted buffer was taken";
    EXPECT_EQ(fa.completedOk, kPosted - 1);
    EXPECT_EQ(fa.xdpCount(NPF_STAT_DROP_RNR), kBurst - veth - (kPosted - 1));
    EXPECT_EQ(fa.droppedInXdp(), fa.xdpCount(NPF_STAT_DROP_RNR) + 1);
    EXPECT_EQ(fa.passed(), 0u);
    EXPECT_EQ(fa.completedLost, 0u);

    const FlowStats fb = b.stats();
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_TRUE(flowAccounted(fb, chk.totals(), kStream)) << "flow b sees its own datagrams only";
    EXPECT_EQ(fb.droppedInXdp() + fb.passed(), 0u) << "flow a's drops are not flow b's";

    // Per flow, the interface's counters split without a remainder.
    const Counters d = delta(rig.xdp(), xdp0);
    for (uint32_t s = NPF_STAT_FLOW_FIRST; s < NPF_STAT_MAX; s++) {
        const char* name = dataplane::kStatNames[s];
        EXPECT_EQ(fa.xdpCount(npf_stat(s)) + fb.xdpCount(npf_stat(s)), d.count(name) ? d.at(name) : 0) << name;
    }
    EXPECT_EQ(fa.reached() + fb.reached(), d.at("rx_total"));
    std::printf("[ numbers  ] flow a: reached %llu, drop_rnr %llu, drop_csum %llu, ok %llu, bad_csum %llu; flow b: "
                "reached %llu, ok %llu; veth drops %llu\n",
                (unsigned long long)fa.reached(), (unsigned long long)fa.xdpCount(NPF_STAT_DROP_RNR),
                (unsigned long long)fa.xdpCount(NPF_STAT_DROP_CSUM), (unsigned long long)fa.completedOk,
                (unsigned long long)fa.completedBadCsum, (unsigned long long)fb.reached(),
                (unsigned long long)fb.completedOk, (unsigned long long)veth);
}

} // namespace
} // namespace npf::e2e
