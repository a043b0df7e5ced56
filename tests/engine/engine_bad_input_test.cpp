// Bad input never crashes anything: malformed frames to the flow port (raw
// AF_PACKET from the peer namespace), bad EngineConfig, posts outside the region.
#include <cstring>
#include <thread>

#include "engine_fixture.h"
#include "packet_builder.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;
using test::PacketBuilder;
constexpr uint16_t kPort = 7200;
constexpr uint32_t kGood = 200;
constexpr uint32_t kOdd = 9; // sender id of the crafted datagrams that npf does steer

uint32_t goodSize(uint32_t k) { return 100 + k * 7 % 1300; }
uint32_t oddSize(uint32_t k) { return 40 + k; }
uint32_t sizeOf(uint32_t id) { return (id >> 24) == kOdd ? oddSize(id & 0xffffff) : goodSize(id & 0xffffff); }

struct BadCase {
    const char* name;
    std::vector<uint8_t> frame;
    const char* counter; // XDP outcome it must land in
};

std::vector<BadCase> badCases(Rig& rig)
{
    test::EthSpec eth{.dst = test::macAddr(rig.veth().rxMac()), .src = test::macAddr(rig.veth().txMac())};
    test::Ipv4Spec ip{.src = test::ipv4Addr(rig.txAddr()), .dst = test::ipv4Addr(rig.rxAddr())};
    test::UdpSpec udp{.sport = 40001, .dport = kPort};
    auto with = [](auto spec, auto edit) {
        edit(spec);
        return spec;
    };
    auto good = [&](uint32_t k) { return payloadFor(senderId(kOdd, k), oddSize(k)); };
    std::vector<uint8_t> padded = good(1);
    padded.resize(padded.size() + 60, 0xee); // junk after the UDP length
    auto v6 = test::Ipv6Spec{.src = test::ipv6Addr("fd00::2"), .dst = test::ipv6Addr("fd00::1")};
    return {
        {"udp header cut short", PacketBuilder().eth(eth).ipv4(ip).udp(udp).payload(good(50)).truncate(14 + 20 + 4).build(),
         "pass_malformed"},
        {"ip total length beyond the frame",
         PacketBuilder().eth(eth).ipv4(with(ip, [](auto& s) { s.totLen = 1400; })).udp(udp).payload(good(51)).build(),
         "pass_malformed"},
        {"udp length beyond the ip payload",
         PacketBuilder().eth(eth).ipv4(ip).udp(with(udp, [](auto& s) { s.len = 1200; })).payload(good(52)).build(),
         "pass_malformed"},
        {"udp length below 8",
         PacketBuilder().eth(eth).ipv4(ip).udp(with(udp, [](auto& s) { s.len = 4; })).payload(good(53)).build(),
         "pass_malformed"},
        {"ihl 4", PacketBuilder().eth(eth).ipv4(with(ip, [](auto& s) { s.ihl = 4; })).udp(udp).payload(good(54)).build(),
         "pass_malformed"},
        {"first fragment",
         PacketBuilder().eth(eth).ipv4(with(ip, [](auto& s) { s.mf = true; })).udp(udp).payload(good(55)).build(),
         "pass_fragment"},
        {"later fragment",
         PacketBuilder().eth(eth).ipv4(with(ip, [](auto& s) {
             s.fragOffset = 10;
             s.proto = test::kIpProtoUdp;
         })).payload(good(56)).build(),
         "pass_fragment"},
        {"only an ethernet header", PacketBuilder().eth(with(eth, [](auto& s) { s.type = 0x0800; })).build(),
         "pass_malformed"},
        // Dropped before they take a buffer, as the kernel drops them.
        {"wrong ip header checksum", [&] {
             auto f = PacketBuilder().eth(eth).ipv4(ip).udp(udp).payload(good(57)).build();
             f[14 + 10] ^= 0x5a;
             return f;
         }(),
         "drop_csum"},
        {"udp checksum 0 over ipv6", [&] {
             auto f = PacketBuilder().eth(eth).ipv6(v6).udp(udp).payload(good(58)).build();
             f[14 + 40 + 6] = f[14 + 40 + 7] = 0;
             return f;
         }(),
         "drop_csum"},
        // Steered: the UDP length is shorter than the IP payload (trailing
        // junk is not part of the datagram), UDP over IPv6 (the flow matches
        // any family), a wrong UDP checksum (completes BAD_CSUM: npf verifies
        // it while copying) and none at all (0 over IPv4: nothing to verify).
        {"udp length shorter than the ip payload",
         PacketBuilder().eth(eth).ipv4(ip).udp(with(udp, [&](auto& s) { s.len = uint16_t(8 + oddSize(1)); }))
             .payload(padded).build(),
         "redir"},
        {"wrong udp checksum", [&] {
             auto f = PacketBuilder().eth(eth).ipv4(ip).udp(udp).payload(good(2)).build();
             f[14 + 20 + 6] ^= 0x5a;
             return f;
         }(),
         "redir"},
        {"udp over ipv6", PacketBuilder().eth(eth).ipv6(v6).udp(udp).payload(good(3)).build(), "redir"},
        {"no udp checksum over ipv4",
         PacketBuilder().eth(eth).ipv4(ip).udp(with(udp, [](auto& s) { s.checksum = false; })).payload(good(4)).build(),
         "redir"},
    };
}

TEST_F(EngineE2E, MalformedDatagramsToTheFlowPortAreCountedNeverFatal)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& flow = eng->openFlow(kPort);
    Checker chk(*eng, flow, {.stride = 2048, .depth = 512}, sizeOf);
    chk.postInitial();
    std::vector<BadCase> cases = badCases(rig);
    uint64_t steered = 0;
    for (const BadCase& c : cases)
        steered += std::string(c.counter) == "redir";
    Stream tx(rig, chk, {.count = kGood, .dstPort = kPort, .size = goodSize, .window = chk.window(),
                         .done = [&chk, steered] { return chk.doneCount() > steered ? chk.doneCount() - steered : 0; }});
    for (const BadCase& c : cases) {
        Counters before = rig.xdp();
        ASSERT_NO_THROW(sendRaw(rig, c.frame)) << c.name;
        // XDP has counted the frame once rx_total moved.
        Counters d;
        EXPECT_TRUE(test::waitUntil([&] { return (d = delta(rig.xdp(), before))["rx_total"] >= 1; }))
            << c.name << ": XDP never saw the frame";
        if (std::string(c.counter) == "redir")
            EXPECT_EQ(d["redir_primary"] + d["redir_backup"], 1u) << c.name << ": " << describe(d);
        else
            EXPECT_EQ(d[c.counter], 1u) << c.name << ": " << describe(d);
    }
    ASSERT_EQ(tx.run(steered + kGood), "");
    const CheckTotals& t = chk.totals();
    EngineStats s = eng->stats();
    EXPECT_EQ(t.failures, 0u) << t.firstFailures;
    EXPECT_EQ(t.lost, 0u);
    EXPECT_EQ(t.badCsum, 1u); // the wrong UDP checksum, never OK
    EXPECT_EQ(s.csumErrors, 1u);
    EXPECT_EQ(t.verified, steered - 1 + kGood);
    EXPECT_EQ(s.badMeta, 0u);
    EXPECT_TRUE(tx.accounted(s, cases.size()));
    // The flow's own count: what XDP found to be the flow's (the steered
    // ones and the two with checksums XDP drops), not what failed to parse.
    uint64_t flowDrops = 0;
    for (const BadCase& c : cases)
        flowDrops += std::string(c.counter) == "drop_csum";
    const FlowStats f = flow.stats();
    EXPECT_TRUE(flowAccounted(f, t, kGood + steered + flowDrops));
    EXPECT_EQ(f.xdpCount(NPF_STAT_DROP_CSUM), flowDrops);
    EXPECT_EQ(f.completedBadCsum, 1u);
    for (uint32_t k = 0; k < kGood; k++)
        EXPECT_EQ(chk.ids().count(senderId(0, k)), 1u) << "good datagram " << k;
}

TEST_F(EngineE2E, BadConfigThrowsClearSystemError)
{
    Rig rig;
    auto expectThrow = [&](EngineConfig cfg, const std::string& needle) {
        try {
            EngineInNs eng(rig, cfg);
            ADD_FAILURE() << "engine accepted a bad config (" << needle << ")";
        } catch (const std::system_error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not a std::system_error: " << e.what();
        }
    };
    expectThrow({.regionSize = (16ull << 20) + 100}, "4096");
    expectThrow({.regionSize = 0}, "4096");
    expectThrow({.regionSize = 16ull << 20, .pagerThreads = 0}, "pager threads must be 1..64, not 0");
    expectThrow({.regionSize = 16ull << 20, .pagerThreads = 65}, "pager threads must be 1..64, not 65");
    // An interface the rx namespace does not have (EngineInNs sets ifname,
    // so build this one by hand).
    try {
        test::NetnsGuard in(rig.veth().rxNs());
        Engine eng({.ifname = "npfnosuch0", .regionSize = 16ull << 20});
        ADD_FAILURE() << "engine on a missing interface";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find("npfnosuch0"), std::string::npos) << e.what();
    }
    EXPECT_EQ(rig.statusJson().find("\"attached\""), std::string::npos)
        << "failed constructions must leave nothing attached: " << rig.statusJson();
}

TEST_F(EngineE2E, PostOutsideTheRegionThrows)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& flow = eng->openFlow(kPort);
    const uint64_t size = eng->regionSize();
    EXPECT_THROW(flow.post(size, 1), std::invalid_argument);
    EXPECT_THROW(flow.post(size - 100, 200), std::invalid_argument);
    EXPECT_THROW(flow.post(UINT64_MAX - 10, 100), std::invalid_argument);
    EXPECT_THROW(flow.post(0, 0), std::invalid_argument);
    EXPECT_EQ(flow.outstanding(), 0u);
    EXPECT_TRUE(flow.post(size - 100, 100));
    EXPECT_EQ(flow.outstanding(), 1u);
}

} // namespace
} // namespace npf::e2e
