// Randomized test of npf_xdp: valid and mutated packets against random map
// states, checked against invariants and against a reference model written
// from the ABI (include/npf/abi.h). Seed and packet count come from
// NPF_FUZZ_SEED / NPF_FUZZ_PACKETS; the seed is printed so a failure can be
// replayed.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "xdp_harness.h"
#include "sys/csum.h"
#include "xsk/meta.h"

namespace npf::test {
namespace {

constexpr uint64_t kRegionPages = 512;
constexpr uint64_t kRegion = kRegionPages * NPF_PAGE_SIZE;
constexpr uint32_t kQueues = 4;
// Frames up to a little beyond NPF_MAX_PAYLOAD: test_run keeps 3520 bytes linear
// (PAGE_SIZE - headroom - tailroom) and puts the rest in frags, so the longer
// ones are multi-buffer, as jumbo frames on veth are.
constexpr size_t kMaxFrame = NPF_MAX_PAYLOAD + 200;
const uint16_t kPorts[] = {4791, 4792, 53, 9999};
const Ipv4Addr kV4[] = {{198, 18, 0, 1}, {198, 18, 0, 9}};
const Ipv6Addr kV6[] = {{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                        {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}};
const uint32_t kFlowIds[] = {0, 1, 2, 5, NPF_MAX_FLOWS - 1, NPF_MAX_FLOWS, 0xffffffffu};

uint64_t envOr(const char* name, uint64_t dflt)
{
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 0) : dflt;
}

// Generations an id or a flow entry gets: a flow entry of another gen than
// its id's is stale (its id was handed to another flow since). 0x10001
// aliases 1 in npf_meta.gen's 16 bits; XDP compares all 32.
const uint32_t kGens[] = {0, 1, 2, 0x10001};

// What the ABI says npf_xdp does with a packet.
struct Expected {
    uint32_t stat;
    uint32_t flow = 0;
    uint32_t flowGen = 0;  // the flow entry's generation
    bool counted = false;  // stat (a flow counter) counts into npf_flow_stats[flow]
    uint16_t payloadOff = 0;
    uint32_t payloadLen = 0;
    bool udpCsumZero = false; // checksum field 0
    bool udpCsumValid = false; // RFC 768 checksum of pseudo-header + datagram holds
};

class Fuzz : public HarnessSuite<::testing::Test, kRegionPages, kQueues> {
protected:
    template <class T>
    T pick(std::span<const T> v)
    {
        return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
    }
    uint64_t u(uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_); }
    bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

    void randomState();
    std::vector<uint8_t> randomPacket();
    uint32_t randomQueue()
    {
        if (chance(0.9))
            return static_cast<uint32_t>(u(0, kQueues - 1));
        static constexpr uint32_t odd[] = {kQueues, NPF_MAX_QUEUES - 1, NPF_MAX_QUEUES};
        return pick(std::span<const uint32_t>(odd));
    }
    Expected model(std::span<const uint8_t> p, uint32_t queue) const;
    Expected outcome(std::span<const uint8_t> p, uint32_t queue) const;
    // npf_flow_stats as a whole against what the model counted since the
    // last reset: no entry moved that should not have.
    void checkFlowTotals();

    struct FlowEntry {
        npf_flow_key key;
        uint32_t id, gen;
    };
    std::mt19937_64 rng_;
    std::vector<FlowEntry> flows_;
    std::map<uint32_t, uint32_t> gens_;         // flow id (with a ring) -> its generation
    std::vector<FlowCounters> flowTotals_;      // the model's npf_flow_stats since the last reset
    std::vector<bool> resident_;
    std::array<std::pair<bool, bool>, kQueues> sockets_{};
};

void Fuzz::randomState()
{
    XdpHarness& h = *harness_;
    if (!flowTotals_.empty())
        checkFlowTotals();
    h.reset();
    flowTotals_.assign(NPF_MAX_FLOWS, FlowCounters{});
    flows_.clear();
    gens_.clear();
    for (uint32_t f : kFlowIds) {
        if (f >= NPF_MAX_FLOWS)
            continue;
        gens_[f] = chance(0.5) ? 0 : pick(std::span<const uint32_t>(kGens));
        h.newGeneration(f, gens_[f]);
    }
    for (uint64_t n = chance(0.05) ? 0 : u(1, 4); n > 0; n--) {
        uint16_t port = pick(std::span<const uint16_t>(kPorts));
        npf_flow_key key = flowKeyAny(port);
        switch (u(0, 4)) {
        case 1: key = flowKeyV4(pick(std::span<const Ipv4Addr>(kV4)), port); break;
        case 2: key = flowKeyV6(pick(std::span<const Ipv6Addr>(kV6)), port); break;
        }
        uint32_t id = chance(0.8) ? static_cast<uint32_t>(u(0, 2)) : pick(std::span<const uint32_t>(kFlowIds));
        // Mostly of the id's generation; else stale (or by chance current).
        const uint32_t gen =
            gens_.contains(id) && chance(0.8) ? gens_[id] : chance(0.1) ? uint32_t(rng_()) : pick(std::span<const uint32_t>(kGens));
        h.addFlow(key, id, gen);
        std::erase_if(flows_, [&](const FlowEntry& f) { return std::memcmp(&f.key, &key, sizeof(key)) == 0; });
        flows_.push_back({key, id, gen});
    }
    for (uint32_t f : kFlowIds) {
        if (f >= NPF_MAX_FLOWS)
            continue;
        static constexpr uint64_t starts[] = {0, 7, NPF_POST_RING_SIZE - 2, 0xfffffffeull, ~0ull - 3};
        uint64_t cons = chance(0.3) ? rng_() : pick(std::span<const uint64_t>(starts));
        static constexpr int64_t avail[] = {0, 1, 2, 3, 8, NPF_POST_RING_SIZE, NPF_POST_RING_SIZE + 1, -1};
        uint64_t prod = cons + static_cast<uint64_t>(pick(std::span<const int64_t>(avail)));
        h.setCursor(f, prod, cons);
        for (uint64_t s = cons; s != cons + 8; s++) {
            uint64_t off = u(0, kRegion - 1);
            uint32_t len = static_cast<uint32_t>(chance(0.8) ? u(0, 4096) : u(4097, 3 * 4096));
            if (chance(0.1))
                off = chance(0.5) ? rng_() : kRegion - u(0, 64);
            if (chance(0.05))
                len = static_cast<uint32_t>(rng_());
            h.setPost(f, s, off, len);
        }
    }
    double density = std::array{0.0, 0.5, 0.95, 1.0}[u(0, 3)];
    resident_.assign(kRegionPages, false);
    for (uint64_t p = 0; p < kRegionPages; p++) {
        resident_[p] = chance(density);
        h.setResident(p, resident_[p]);
    }
    for (uint32_t q = 0; q < kQueues; q++) {
        sockets_[q] = {chance(0.85), chance(0.85)};
        h.setSockets(q, sockets_[q].first, sockets_[q].second);
    }
}

std::vector<uint8_t> Fuzz::randomPacket()
{
    if (chance(0.04))
        return PacketBuilder().eth({.type = kEthArp}).payloadPattern(u(28, 60)).build();
    PacketBuilder b;
    b.eth();
    if (chance(0.15))
        b.vlan({.vid = static_cast<uint16_t>(u(0, 4095)), .tpid = chance(0.5) ? kEth8021Q : kEth8021AD});
    if (chance(0.03))
        b.vlan({.vid = static_cast<uint16_t>(u(0, 4095))});
    if (chance(0.6)) {
        Ipv4Spec ip{.dst = pick(std::span<const Ipv4Addr>(kV4))};
        if (chance(0.15))
            ip.options.assign(u(1, 40), 1);
        ip.mf = chance(0.05);
        ip.df = chance(0.5);
        if (chance(0.05))
            ip.fragOffset = static_cast<uint16_t>(u(1, 8191));
        b.ipv4(std::move(ip));
    } else {
        b.ipv6({.dst = pick(std::span<const Ipv6Addr>(kV6))});
        if (chance(0.1)) {
            static constexpr uint8_t ext[] = {kIpProtoHopOpts, kIpProtoRouting, kIpProtoDstOpts};
            b.ipv6Ext({.type = pick(std::span<const uint8_t>(ext)), .data = std::vector<uint8_t>(u(0, 20), 0)});
        }
        if (chance(0.05))
            b.ipv6Frag({.offset = static_cast<uint16_t>(u(0, 100)), .more = chance(0.5)});
    }
    double l4 = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (l4 < 0.85)
        b.udp({.dport = chance(0.95) ? pick(std::span<const uint16_t>(kPorts)) : static_cast<uint16_t>(rng_())});
    else if (l4 < 0.93)
        b.tcp({.dport = pick(std::span<const uint16_t>(kPorts))});
    else
        b.icmp();
    const uint64_t size = chance(0.85) ? u(0, 1472) : chance(0.3) ? u(1473, 3400) : u(3401, NPF_MAX_PAYLOAD + 64);
    b.payloadPattern(size, static_cast<uint8_t>(u(0, 255)));
    std::vector<uint8_t> p = b.build();

    // Mutations: flip bits (headers mostly), cut, stretch, or pure noise.
    switch (u(0, 9)) {
    case 0:
    case 1:
    case 2:
        for (uint64_t n = u(1, 8); n > 0; n--) {
            size_t at = chance(0.8) ? u(0, std::min<size_t>(p.size(), 90) - 1) : u(0, p.size() - 1);
            p[at] ^= static_cast<uint8_t>(1u << u(0, 7));
        }
        break;
    case 3:
        p.resize(u(14, p.size()));
        break;
    case 4:
        p.resize(std::min(kMaxFrame, p.size() + u(1, 64)), 0);
        break;
    case 5:
        if (chance(0.2)) {
            p.resize(u(14, 200));
            for (uint8_t& x : p)
                x = static_cast<uint8_t>(rng_());
        }
        break;
    default:
        break;
    }
    return p;
}

Expected Fuzz::model(std::span<const uint8_t> p, uint32_t queue) const
{
    Expected e = outcome(p, queue);
    e.counted = isFlowStat(e.stat) && e.flow < NPF_MAX_FLOWS && gens_.contains(e.flow) && gens_.at(e.flow) == e.flowGen;
    return e;
}

void Fuzz::checkFlowTotals()
{
    const std::vector<FlowCounters> now = harness_->allFlowCounters();
    for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++)
        for (uint32_t i = 0; i < NPF_FLOW_STAT_MAX; i++)
            EXPECT_EQ(now[id][i], flowTotals_[id][i]) << "npf_flow_stats[" << id << "] " << statName(NPF_STAT_FLOW_FIRST + i);
}

Expected Fuzz::outcome(std::span<const uint8_t> p, uint32_t queue) const
{
    auto rd16 = [&](size_t o) { return static_cast<uint32_t>(p[o]) << 8 | p[o + 1]; };
    const size_t n = p.size();
    if (n < 14)
        return {NPF_STAT_PASS_MALFORMED};
    size_t off = 14;
    uint32_t type = rd16(12);
    if (type == kEth8021Q || type == kEth8021AD) {
        if (n < 18)
            return {NPF_STAT_PASS_MALFORMED};
        type = rd16(16);
        off = 18;
    }
    npf_flow_key key{};
    uint32_t l4Room;
    bool ipHdrOk = true;
    std::span<const uint8_t> addrs; // source + destination address (pseudo-header)
    if (type == kEthIpv4) {
        if (n < off + 20)
            return {NPF_STAT_PASS_MALFORMED};
        uint32_t ihl = (p[off] & 0xfu) * 4, tot = rd16(off + 2);
        if (p[off] >> 4 != 4 || ihl < 20 || tot < ihl || off + tot > n)
            return {NPF_STAT_PASS_MALFORMED};
        if (rd16(off + 6) & 0x3fff)
            return {NPF_STAT_PASS_FRAGMENT};
        if (p[off + 9] != kIpProtoUdp)
            return {NPF_STAT_PASS_NOT_UDP};
        key.family = NPF_FAMILY_IPV4;
        std::memcpy(key.addr, &p[off + 16], 4);
        ipHdrOk = foldChecksum(onesSum(p.subspan(off, ihl))) == 0xffff;
        addrs = p.subspan(off + 12, 8);
        l4Room = tot - ihl;
        off += ihl;
    } else if (type == kEthIpv6) {
        if (n < off + 40)
            return {NPF_STAT_PASS_MALFORMED};
        uint32_t plen = rd16(off + 4);
        if (p[off] >> 4 != 6 || off + 40 + plen > n)
            return {NPF_STAT_PASS_MALFORMED};
        uint8_t nh = p[off + 6];
        if (nh == kIpProtoFragment)
            return {NPF_STAT_PASS_FRAGMENT};
        // hop-by-hop, routing, dest opts, ESP, AH, mobility, HIP, shim6
        static constexpr uint8_t ext[] = {0, 43, 60, 50, 51, 135, 139, 140};
        if (std::find(std::begin(ext), std::end(ext), nh) != std::end(ext))
            return {NPF_STAT_PASS_IPV6_EXT};
        if (nh != kIpProtoUdp)
            return {NPF_STAT_PASS_NOT_UDP};
        key.family = NPF_FAMILY_IPV6;
        std::memcpy(key.addr, &p[off + 8 + 16], 16);
        addrs = p.subspan(off + 8, 32);
        l4Room = plen;
        off += 40;
    } else {
        return {NPF_STAT_PASS_NOT_IP};
    }
    if (n < off + 8)
        return {NPF_STAT_PASS_MALFORMED};
    uint32_t ulen = rd16(off + 4);
    if (ulen < 8 || ulen > l4Room)
        return {NPF_STAT_PASS_MALFORMED};
    key.port = htons(static_cast<uint16_t>(rd16(off + 2)));

    const FlowEntry* flow = nullptr;
    npf_flow_key any = flowKeyAny(static_cast<uint16_t>(rd16(off + 2)));
    for (const npf_flow_key* k : {&key, &any})
        for (const FlowEntry& f : flows_)
            if (!flow && std::memcmp(&f.key, k, sizeof(f.key)) == 0)
                flow = &f;
    if (!flow)
        return {NPF_STAT_PASS_NO_FLOW};
    const uint32_t* id = &flow->id;
    Expected e{0, *id, flow->gen, false, static_cast<uint16_t>(off + 8), ulen - 8};
    e.udpCsumZero = rd16(off + 6) == 0;
    e.udpCsumValid = foldChecksum(onesSum(p.subspan(off, ulen), onesSum(addrs, kIpProtoUdp + ulen))) == 0xffff;
    if (*id >= NPF_MAX_FLOWS)
        return e.stat = NPF_STAT_PASS_BAD_FLOW, e;
    if (e.payloadLen > NPF_MAX_PAYLOAD)
        return e.stat = NPF_STAT_PASS_TOO_BIG, e;
    if (queue >= NPF_MAX_QUEUES)
        return e.stat = NPF_STAT_PASS_BAD_QUEUE, e;
    if (queue >= kQueues || !sockets_[queue].first || !sockets_[queue].second)
        return e.stat = NPF_STAT_PASS_NO_SOCKET, e;
    if (!ipHdrOk || (e.udpCsumZero && key.family == NPF_FAMILY_IPV6))
        return e.stat = NPF_STAT_DROP_CSUM, e;
    npf_cursor c = harness_->cursor(*id);
    // The id was handed to another flow since this entry was made.
    if (c.gen != e.flowGen)
        return e.stat = NPF_STAT_PASS_BAD_FLOW, e;
    if (!(c.flags & NPF_CURSOR_F_SERVED))
        return e.stat = NPF_STAT_PASS_NO_SOCKET, e;
    if (static_cast<int64_t>(c.prod - c.cons) <= 0)
        return e.stat = NPF_STAT_DROP_RNR, e;
    npf_post post = harness_->post(*id, c.cons);
    if (c.prod - c.cons > NPF_POST_RING_SIZE || post.len > kRegion || post.offset > kRegion - post.len)
        return e.stat = NPF_STAT_DROP_BAD_DESC, e;
    uint32_t len = std::min(e.payloadLen, post.len);
    bool res = true;
    if (len)
        for (uint64_t pg = post.offset / NPF_PAGE_SIZE; pg <= (post.offset + len - 1) / NPF_PAGE_SIZE; pg++)
            res = res && resident_[pg];
    return e.stat = res ? NPF_STAT_REDIR_PRIMARY : NPF_STAT_REDIR_BACKUP, e;
}

TEST_F(Fuzz, RandomPacketsAndStates)
{
    const uint64_t seed = envOr("NPF_FUZZ_SEED", 0x6e7066u);
    const uint64_t packets = envOr("NPF_FUZZ_PACKETS", 20000);
    std::printf("npf_xdp fuzz: seed 0x%llx, %llu packets (replay with NPF_FUZZ_SEED)\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(packets));
    RecordProperty("seed", std::to_string(seed));
    rng_.seed(seed);
    XdpHarness& h = *harness_;
    std::array<uint64_t, NPF_STAT_MAX> seen{};
    uint64_t countedForFlow = 0, countedForNone = 0; // flow outcomes into a flow's entry / no entry (stale)

    for (uint64_t i = 0; i < packets; i++) {
        if (i % 64 == 0)
            randomState();
        std::vector<uint8_t> pkt = randomPacket();
        if (pkt.size() < 14)
            continue;
        uint32_t queue = randomQueue();
        // Only flow ids with a post ring map have cursors the program can move.
        std::map<uint32_t, npf_cursor> cur;
        std::map<uint32_t, FlowCounters> flowBefore;
        for (uint32_t f : h.ringIds()) {
            cur[f] = h.cursor(f);
            flowBefore[f] = h.flowCounters(f);
        }
        const Expected want = model(pkt, queue);
        const Counters before = h.counters();
        RunResult r = h.run(pkt, queue);
        const Counters after = h.counters();

        SCOPED_TRACE("seed 0x" + [&] {
            char b[32];
            std::snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(seed));
            return std::string(b);
        }() + " packet #" + std::to_string(i) + " rx queue " + std::to_string(queue) + "\n" + hexdump(pkt));

        EXPECT_TRUE(r.verdict == XDP_PASS || r.verdict == XDP_DROP || r.verdict == XDP_REDIRECT)
            << "verdict " << r.verdict;
        // Exactly one outcome, matching the verdict and the model.
        EXPECT_EQ(after[NPF_STAT_RX_TOTAL] - before[NPF_STAT_RX_TOTAL], 1u);
        uint32_t outcome = NPF_STAT_MAX, outcomes = 0;
        for (uint32_t k = 0; k < NPF_STAT_MAX; k++) {
            if (isOutcome(k) && after[k] != before[k]) {
                outcomes += static_cast<uint32_t>(after[k] - before[k]);
                outcome = k;
            }
        }
        ASSERT_EQ(outcomes, 1u) << "outcome counters do not add up";
        seen[outcome]++;
        EXPECT_EQ(verdictName(r.verdict), std::string(verdictName(outcomeVerdict(outcome))))
            << "outcome " << statName(outcome);
        EXPECT_STREQ(statName(outcome), statName(want.stat)) << "program and ABI model disagree";
        EXPECT_TRUE(std::ranges::equal(r.packet(), pkt)) << "packet bytes altered";
        EXPECT_EQ(r.metaLen, 0u);
        if (r.verdict == XDP_PASS) {
            EXPECT_EQ(r.npfMetaLen, 0u);
        }
        // npf never alters, drops or steers traffic that is not a flow.
        if (want.stat <= NPF_STAT_PASS_NO_FLOW) {
            EXPECT_EQ(r.verdict, XDP_PASS) << "non-flow packet not passed";
            EXPECT_EQ(r.out, pkt) << "non-flow packet altered";
        }

        // Cursors: at most the matched flow's cons moves, by one, never past prod.
        for (uint32_t f : h.ringIds()) {
            npf_cursor now = h.cursor(f);
            EXPECT_EQ(now.prod, cur[f].prod);
            bool consumed = outcome == NPF_STAT_REDIR_PRIMARY || outcome == NPF_STAT_REDIR_BACKUP ||
                            outcome == NPF_STAT_DROP_BAD_DESC;
            uint64_t wantCons = cur[f].cons + ((consumed && f == want.flow) ? 1 : 0);
            EXPECT_EQ(now.cons, wantCons) << "cons of flow " << f;
            if (static_cast<int64_t>(cur[f].prod - cur[f].cons) >= 0) {
                EXPECT_LE(static_cast<int64_t>(now.cons - cur[f].cons), static_cast<int64_t>(cur[f].prod - cur[f].cons))
                    << "cons of flow " << f << " passed prod";
            }
        }

        bool truncated = after[NPF_STAT_TRUNCATED] != before[NPF_STAT_TRUNCATED];
        if (r.verdict == XDP_REDIRECT) {
            ASSERT_EQ(r.npfMetaLen, sizeof(npf_meta));
            npf_meta m = *r.meta();
            npf_post post = h.post(want.flow, cur[want.flow].cons);
            EXPECT_EQ(m.magic, NPF_META_MAGIC);
            EXPECT_EQ(m.version, NPF_META_VERSION);
            EXPECT_EQ(m.flow, want.flow);
            EXPECT_EQ(m.seq, static_cast<uint32_t>(cur[want.flow].cons));
            EXPECT_EQ(m.offset, post.offset);
            EXPECT_EQ(m.len, std::min(want.payloadLen, post.len));
            EXPECT_EQ(m.payload_off, want.payloadOff);
            EXPECT_LE(m.payload_off + m.len, pkt.size());
            EXPECT_LE(m.offset + m.len, kRegion);
            EXPECT_EQ((m.flags & NPF_META_F_TRUNCATED) != 0, want.payloadLen > post.len);
            EXPECT_EQ(truncated, (m.flags & NPF_META_F_TRUNCATED) != 0);
            EXPECT_EQ((m.flags & NPF_META_F_BACKUP) != 0, outcome == NPF_STAT_REDIR_BACKUP);
            EXPECT_EQ((m.flags & NPF_META_F_NO_CSUM) != 0, want.udpCsumZero);
            EXPECT_EQ(m.flags & ~(NPF_META_F_TRUNCATED | NPF_META_F_BACKUP | NPF_META_F_NO_CSUM), 0);
            EXPECT_EQ(m.gen, static_cast<uint16_t>(want.flowGen));
            // The service's check (payload sum + meta.csum) agrees with RFC 768.
            if (!want.udpCsumZero) {
                const uint16_t sum = csumFold(csumPartial(pkt.data() + m.payload_off, want.payloadLen) + m.csum);
                EXPECT_EQ(sum == 0xffff, want.udpCsumValid) << "meta.csum 0x" << std::hex << m.csum;
            }
            EXPECT_EQ(xsk::stamped(m), (m.flags & NPF_META_F_BACKUP) || m.seq % NPF_FAST_STAMP_EVERY == 0);
            if (xsk::stamped(m)) {
                EXPECT_GE(xsk::steeredAtNs(m, r.endNs), r.startNs);
                EXPECT_LE(xsk::steeredAtNs(m, r.endNs), r.endNs);
            }
        } else {
            EXPECT_FALSE(truncated);
        }

        // Per-flow counters: the outcome (and truncated) in the flow's entry
        // when it is of the entry's generation, nowhere else.
        if (isFlowStat(outcome))
            (want.counted ? countedForFlow : countedForNone)++;
        for (uint32_t f : h.ringIds()) {
            FlowCounters wantF = flowBefore[f];
            if (want.counted && f == want.flow && isFlowStat(outcome)) {
                wantF[outcome - NPF_STAT_FLOW_FIRST]++;
                if (truncated)
                    wantF[NPF_STAT_TRUNCATED - NPF_STAT_FLOW_FIRST]++;
            }
            const FlowCounters now = h.flowCounters(f);
            for (uint32_t k = 0; k < NPF_FLOW_STAT_MAX; k++)
                EXPECT_EQ(now[k], wantF[k]) << "npf_flow_stats[" << f << "] " << statName(NPF_STAT_FLOW_FIRST + k)
                                            << " (the packet's flow " << want.flow << " gen " << want.flowGen
                                            << ", outcome " << statName(outcome) << ")";
            flowTotals_.at(f) = wantF; // ids with a ring: checked here; the rest by checkFlowTotals
        }
        if (HasFailure())
            break; // the first failing packet, with its trace, is the report
    }

    if (!HasFailure())
        checkFlowTotals();
    std::printf("flow outcomes: %llu counted for their flow, %llu for none (stale generation)\n",
                static_cast<unsigned long long>(countedForFlow), static_cast<unsigned long long>(countedForNone));
    std::printf("outcomes:");
    for (uint32_t k = 0; k < NPF_STAT_MAX; k++)
        if (seen[k])
            std::printf(" %s=%llu", statName(k), static_cast<unsigned long long>(seen[k]));
    std::printf("\n");
    // The generator must reach every outcome test_run can produce, or the test proves little.
    for (uint32_t k : {NPF_STAT_PASS_NOT_IP, NPF_STAT_PASS_NOT_UDP, NPF_STAT_PASS_FRAGMENT, NPF_STAT_PASS_IPV6_EXT,
                       NPF_STAT_PASS_MALFORMED, NPF_STAT_PASS_NO_FLOW, NPF_STAT_PASS_BAD_FLOW, NPF_STAT_PASS_BAD_QUEUE,
                       NPF_STAT_PASS_NO_SOCKET, NPF_STAT_PASS_TOO_BIG, NPF_STAT_DROP_RNR, NPF_STAT_DROP_BAD_DESC, NPF_STAT_DROP_CSUM,
                       NPF_STAT_REDIR_PRIMARY,
                       NPF_STAT_REDIR_BACKUP})
        if (packets >= 2000 && !HasFailure()) {
            EXPECT_GT(seen[k], 0u) << "no packet reached " << statName(k);
        }
    if (packets >= 2000 && !HasFailure()) {
        EXPECT_GT(countedForFlow, 0u) << "no flow outcome counted for its flow";
        EXPECT_GT(countedForNone, 0u) << "no flow outcome of a stale generation";
    }
}

} // namespace
} // namespace npf::test
