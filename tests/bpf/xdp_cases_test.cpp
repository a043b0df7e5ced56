// Table-driven tests of npf_xdp: each case is {packet(s), map state, rx
// queue, verdict, metadata, counter deltas, per-flow counter deltas, cursor
// after}.
#include <gtest/gtest.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>

#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "xdp_harness.h"
#include "sys/csum.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "xsk/meta.h"

namespace npf::test {
namespace {

constexpr uint16_t kPort = 4791;
constexpr uint64_t kPage = NPF_PAGE_SIZE;
constexpr uint64_t kRegionPages = 1024;
constexpr uint64_t kRegion = kRegionPages * kPage;
constexpr uint32_t kQueues = 4;
constexpr uint16_t kOff4 = 14 + 20 + 8; // payload offset, Ethernet + IPv4 + UDP
constexpr uint16_t kOff6 = 14 + 40 + 8;
const Ipv4Addr kDst4{198, 18, 0, 1};
const Ipv4Addr kOther4{198, 18, 0, 9};
const Ipv6Addr kDst6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const Ipv6Addr kOther6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};

struct FlowSpec {
    npf_flow_key key;
    uint32_t id;
    uint32_t gen;
};
struct PostSpec {
    uint32_t flow;
    uint64_t seq;
    uint64_t offset;
    uint32_t len;
};
struct CursorSpec {
    uint32_t flow;
    uint64_t prod;
    uint64_t cons;
};
struct SocketSpec {
    uint32_t queue;
    bool primary;
    bool backup;
};

// Map state before the first packet of a case.
struct MapState {
    std::vector<FlowSpec> flows;
    std::vector<PostSpec> posts;
    std::vector<CursorSpec> cursors;
    std::optional<std::vector<uint64_t>> residentOnly; // unset: every page resident
    std::vector<SocketSpec> sockets;
    std::vector<std::pair<uint32_t, uint32_t>> generations; // flow id, gen: XdpHarness::newGeneration, first

    MapState& flow(const npf_flow_key& k, uint32_t id, uint32_t gen = 0) { return flows.push_back({k, id, gen}), *this; }
    MapState& post(uint32_t f, uint64_t seq, uint64_t off, uint32_t len) { return posts.push_back({f, seq, off, len}), *this; }
    MapState& cursor(uint32_t f, uint64_t prod, uint64_t cons) { return cursors.push_back({f, prod, cons}), *this; }
    MapState& resident(std::vector<uint64_t> pages) { return residentOnly = std::move(pages), *this; }
    MapState& socketsOn(uint32_t q, bool primary = true, bool backup = true)
    {
        return sockets.push_back({q, primary, backup}), *this;
    }
    MapState& noSockets() { return sockets.clear(), *this; }
    // Flow id `id` was handed to a flow of generation `gen` (its ring and its
    // npf_flow_stats entry are of that gen; 0 unless set).
    MapState& generation(uint32_t id, uint32_t gen) { return generations.emplace_back(id, gen), *this; }
    MapState& noFlows() { return flows.clear(), *this; }
};

// Flow 0 on any address, port kPort; one post (seq 0: 2 KiB at 8 KiB); all
// pages resident; both sockets on queue 0.
MapState base()
{
    return MapState{}.flow(flowKeyAny(kPort), 0).post(0, 0, 2 * kPage, 2048).cursor(0, 1, 0).socketsOn(0);
}

struct MetaExpect {
    uint8_t flags;
    uint16_t flow;
    uint16_t payloadOff;
    uint32_t seq;
    uint32_t len;
    uint64_t offset;
    bool csumOk = true; // the payload's sum + meta.csum verifies (the service's check)
    uint16_t gen = 0;   // the flow entry's generation, low 16 bits
};

struct Send {
    std::vector<uint8_t> pkt;
    uint32_t queue;
    int verdict;
    std::optional<MetaExpect> meta; // required iff verdict == XDP_REDIRECT
    size_t metaIn = 0;              // bytes of metadata already in front of the packet
};

using PerFlow = std::map<uint32_t, std::map<uint32_t, uint64_t>>; // flow id -> npf_stat -> delta

struct Case {
    std::string name;
    MapState setup;
    std::vector<Send> sends;
    std::map<uint32_t, uint64_t> counters; // deltas; every other counter must not move; rx_total = sends
    std::map<uint32_t, uint64_t> consAfter; // flows whose cons moves; every other cursor must not
    // The flow id whose npf_flow_stats entry gets the flow's counters of
    // `counters` (isFlowStat); nullopt: none does (a stale generation).
    std::optional<uint32_t> flow = 0;
    // Instead of the above when set: every flow id's deltas. Every other
    // entry must not move, whichever is used.
    std::optional<PerFlow> perFlow;

    PerFlow flowDeltas() const
    {
        if (perFlow)
            return *perFlow;
        PerFlow d;
        if (flow)
            for (const auto& [k, n] : counters)
                if (isFlowStat(k))
                    d[*flow][k] = n;
        return d;
    }
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

// ---- packets -------------------------------------------------------------

PacketBuilder udp4(uint16_t dport = kPort, Ipv4Addr dst = kDst4)
{
    return std::move(PacketBuilder().eth().ipv4({.dst = dst}).udp({.dport = dport}));
}
PacketBuilder udp6(uint16_t dport = kPort, Ipv6Addr dst = kDst6)
{
    return std::move(PacketBuilder().eth().ipv6({.dst = dst}).udp({.dport = dport}));
}
std::vector<uint8_t> v4(size_t payload, uint16_t dport = kPort, Ipv4Addr dst = kDst4)
{
    return udp4(dport, dst).payloadPattern(payload).build();
}
std::vector<uint8_t> v6(size_t payload, uint16_t dport = kPort, Ipv6Addr dst = kDst6)
{
    return udp6(dport, dst).payloadPattern(payload).build();
}
std::vector<uint8_t> arp()
{
    const std::vector<uint8_t> body{0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 2, 198, 18, 0, 2,
                                    0, 0, 0, 0, 0, 0, 198, 18, 0, 1};
    return PacketBuilder().eth({.dst = macAddr("ff:ff:ff:ff:ff:ff"), .type = kEthArp}).payload(body).build();
}
std::vector<uint8_t> padTo(std::vector<uint8_t> p, size_t n)
{
    p.resize(std::max(p.size(), n), 0);
    return p;
}
std::vector<uint8_t> nops(size_t n) { return std::vector<uint8_t>(n, 1); }
std::vector<uint8_t> corrupt(std::vector<uint8_t> p, size_t at)
{
    p[at] ^= 0x40;
    return p;
}

// ---- case shapes ----------------------------------------------------------

Case pass(std::string name, std::vector<uint8_t> pkt, uint32_t stat, MapState s = base(), uint32_t queue = 0)
{
    return Case{std::move(name), std::move(s), {{std::move(pkt), queue, XDP_PASS, std::nullopt}}, {{stat, 1}}, {}};
}

Case drop(std::string name, std::vector<uint8_t> pkt, uint32_t stat, MapState s, std::map<uint32_t, uint64_t> consAfter)
{
    return Case{std::move(name), std::move(s), {{std::move(pkt), 0, XDP_DROP, std::nullopt}}, {{stat, 1}},
                std::move(consAfter)};
}

// One packet steered into seq 0 of flow 0 (the base() post unless s says otherwise).
Case redirect(std::string name, std::vector<uint8_t> pkt, MetaExpect m, MapState s = base(), uint32_t queue = 0)
{
    std::map<uint32_t, uint64_t> counters{
        {(m.flags & NPF_META_F_BACKUP) ? NPF_STAT_REDIR_BACKUP : NPF_STAT_REDIR_PRIMARY, 1}};
    if (m.flags & NPF_META_F_TRUNCATED)
        counters[NPF_STAT_TRUNCATED] = 1;
    uint64_t cons = 0;
    for (const CursorSpec& c : s.cursors)
        if (c.flow == m.flow)
            cons = c.cons + 1;
    return Case{std::move(name), std::move(s), {{std::move(pkt), queue, XDP_REDIRECT, m}}, counters,
                {{m.flow, cons}}, m.flow};
}

// A case whose flow outcomes count for no flow (its flow entry is of a stale generation).
Case noFlowCounts(Case c)
{
    c.flow = std::nullopt;
    return c;
}

MetaExpect primary(uint16_t payloadOff, uint32_t len, uint64_t offset = 2 * kPage, uint32_t seq = 0,
                   uint16_t flow = 0)
{
    return {0, flow, payloadOff, seq, len, offset};
}

std::vector<Case> cases()
{
    std::vector<Case> v;

    // ---- not IP / not UDP / not a flow: PASS, untouched --------------------------
    v.push_back(pass("arp", arp(), NPF_STAT_PASS_NOT_IP));
    v.push_back(pass("lldp", PacketBuilder().eth({.type = 0x88cc}).payloadPattern(40).build(), NPF_STAT_PASS_NOT_IP));
    v.push_back(pass("ipv4_udp_other_port", v4(100, kPort + 1), NPF_STAT_PASS_NO_FLOW));
    v.push_back(pass("ipv6_udp_other_port", v6(100, kPort + 1), NPF_STAT_PASS_NO_FLOW));
    v.push_back(pass("ipv4_icmp", PacketBuilder().eth().ipv4().icmp().payloadPattern(56).build(), NPF_STAT_PASS_NOT_UDP));
    v.push_back(pass("ipv4_tcp_to_flow_port", PacketBuilder().eth().ipv4().tcp({.dport = kPort}).build(),
                     NPF_STAT_PASS_NOT_UDP));
    v.push_back(pass("ipv6_icmpv6", PacketBuilder().eth().ipv6().icmp({.type = 128}).payloadPattern(56).build(),
                     NPF_STAT_PASS_NOT_UDP));
    v.push_back(pass("ipv6_no_next_header", PacketBuilder().eth().ipv6().build(), NPF_STAT_PASS_NOT_UDP));
    v.push_back(pass("no_flows_at_all", v4(100), NPF_STAT_PASS_NO_FLOW, base().noFlows()));

    // ---- IPv4 header variants ------------------------------------------------------
    for (uint8_t ihl = 6; ihl <= 15; ihl++) {
        auto pkt = PacketBuilder().eth().ipv4({.options = nops((ihl - 5) * 4u)}).udp().payloadPattern(64).build();
        v.push_back(redirect("ipv4_options_ihl" + std::to_string(ihl), pkt,
                             primary(static_cast<uint16_t>(14 + ihl * 4 + 8), 64)));
    }
    for (uint8_t ihl : {0, 4})
        v.push_back(pass("ipv4_ihl" + std::to_string(ihl),
                         PacketBuilder().eth().ipv4({.ihl = ihl}).udp().payloadPattern(64).build(),
                         NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("ipv4_version6_in_ipv4_ethertype",
                     PacketBuilder().eth().ipv4({.version = 6}).udp().payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("ipv4_mf_fragment", PacketBuilder().eth().ipv4({.mf = true}).udp().payloadPattern(64).build(),
                     NPF_STAT_PASS_FRAGMENT));
    v.push_back(pass("ipv4_offset_fragment",
                     PacketBuilder().eth().ipv4({.fragOffset = 185, .proto = kIpProtoUdp}).payloadPattern(72).build(),
                     NPF_STAT_PASS_FRAGMENT));
    v.push_back(redirect("ipv4_df_is_not_a_fragment",
                         PacketBuilder().eth().ipv4({.df = true}).udp().payloadPattern(64).build(), primary(kOff4, 64)));
    v.push_back(pass("ipv4_tot_len_beyond_packet",
                     PacketBuilder().eth().ipv4({.totLen = 20 + 8 + 64 + 1}).udp().payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("ipv4_tot_len_below_ihl",
                     PacketBuilder().eth().ipv4({.totLen = 19}).udp().payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));
    // Ethernet pads short frames to 60 bytes: the UDP length, not the frame, says how long the payload is.
    v.push_back(redirect("ipv4_ethernet_padding_ignored", padTo(v4(4), 60), primary(kOff4, 4)));

    // ---- IPv6 -------------------------------------------------------------------------
    v.push_back(redirect("ipv6_udp", v6(100), primary(kOff6, 100)));
    for (auto [name, type] : {std::pair{"hopopts", kIpProtoHopOpts}, std::pair{"routing", kIpProtoRouting},
                              std::pair{"dstopts", kIpProtoDstOpts}}) {
        std::vector<uint8_t> data = type == kIpProtoRouting ? std::vector<uint8_t>{4, 0, 0, 0, 0, 0}
                                                            : std::vector<uint8_t>{1, 4, 0, 0, 0, 0};
        v.push_back(pass(std::string("ipv6_ext_") + name,
                         PacketBuilder().eth().ipv6().ipv6Ext({.type = type, .data = data}).udp().payloadPattern(64).build(),
                         NPF_STAT_PASS_IPV6_EXT));
    }
    v.push_back(pass("ipv6_fragment",
                     PacketBuilder().eth().ipv6().ipv6Frag({.more = true, .id = 7}).udp().payloadPattern(64).build(),
                     NPF_STAT_PASS_FRAGMENT));
    v.push_back(pass("ipv6_payload_len_beyond_packet",
                     PacketBuilder().eth().ipv6({.payloadLen = 8 + 64 + 1}).udp().payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("ipv6_version4_in_ipv6_ethertype",
                     PacketBuilder().eth().ipv6({.version = 4}).udp().payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));

    // ---- VLAN -------------------------------------------------------------------------
    v.push_back(redirect("vlan_8021q",
                         PacketBuilder().eth().vlan({.vid = 100}).ipv4().udp().payloadPattern(64).build(),
                         primary(kOff4 + 4, 64)));
    v.push_back(redirect("vlan_8021ad",
                         PacketBuilder().eth().vlan({.vid = 100, .tpid = kEth8021AD}).ipv4().udp().payloadPattern(64).build(),
                         primary(kOff4 + 4, 64)));
    v.push_back(redirect("vlan_8021q_ipv6",
                         PacketBuilder().eth().vlan({.vid = 5}).ipv6().udp().payloadPattern(64).build(),
                         primary(kOff6 + 4, 64)));
    v.push_back(pass("vlan_qinq_inner_tag_not_ip",
                     PacketBuilder()
                         .eth()
                         .vlan({.vid = 100, .tpid = kEth8021AD})
                         .vlan({.vid = 200})
                         .ipv4()
                         .udp()
                         .payloadPattern(64)
                         .build(),
                     NPF_STAT_PASS_NOT_IP));

    // ---- truncated headers --------------------------------------------------------------
    // A frame shorter than an Ethernet header never reaches XDP (see ShortFrameRefused).
    v.push_back(pass("ethernet_header_only", udp4().payloadPattern(64).truncate(14).build(), NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("truncated_vlan",
                     PacketBuilder().eth().vlan().ipv4().udp().payloadPattern(64).truncate(17).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("truncated_ipv4", udp4().payloadPattern(64).truncate(14 + 19).build(), NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("truncated_ipv6", udp6().payloadPattern(64).truncate(14 + 39).build(), NPF_STAT_PASS_MALFORMED));
    // tot_len agrees with the cut frame, so only the UDP header check can catch it.
    v.push_back(pass("truncated_udp",
                     PacketBuilder().eth().ipv4({.totLen = 20 + 4}).udp().truncate(14 + 24).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("truncated_udp_ipv6",
                     PacketBuilder().eth().ipv6({.payloadLen = 4}).udp().truncate(14 + 44).build(),
                     NPF_STAT_PASS_MALFORMED));

    // ---- UDP length -----------------------------------------------------------------------
    v.push_back(pass("udp_len_beyond_ip_payload",
                     PacketBuilder().eth().ipv4().udp({.len = 8 + 64 + 1}).payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("udp_len_below_8", PacketBuilder().eth().ipv4().udp({.len = 7}).payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(pass("udp_len_beyond_ip_payload_ipv6",
                     PacketBuilder().eth().ipv6().udp({.len = 8 + 64 + 1}).payloadPattern(64).build(),
                     NPF_STAT_PASS_MALFORMED));
    v.push_back(redirect("udp_len_shorter_than_ip_payload",
                         PacketBuilder().eth().ipv4().udp({.len = 8 + 10}).payloadPattern(64).build(),
                         primary(kOff4, 10)));

    // ---- flow matching ---------------------------------------------------------------------
    {
        MapState s = base().flow(flowKeyV4(kDst4, kPort), 3).cursor(3, 1, 0).post(3, 0, 16 * kPage, 1024);
        v.push_back(redirect("flow_exact_v4_beats_wildcard", v4(100), primary(kOff4, 100, 16 * kPage, 0, 3), s));
        v.push_back(redirect("flow_wildcard_when_address_differs", v4(100, kPort, kOther4), primary(kOff4, 100), s));
    }
    {
        MapState s = base().noFlows().flow(flowKeyV4(kDst4, kPort), 3).cursor(3, 1, 0).post(3, 0, 16 * kPage, 1024);
        v.push_back(pass("flow_wrong_v4_address_no_wildcard", v4(100, kPort, kOther4), NPF_STAT_PASS_NO_FLOW, s));
        v.push_back(pass("flow_v4_key_does_not_match_v6", v6(100), NPF_STAT_PASS_NO_FLOW, s));
    }
    {
        MapState s = base().noFlows().flow(flowKeyV6(kDst6, kPort), 5).cursor(5, 1, 0).post(5, 0, 32 * kPage, 1024);
        v.push_back(redirect("flow_exact_v6", v6(100), primary(kOff6, 100, 32 * kPage, 0, 5), s));
        v.push_back(pass("flow_wrong_v6_address", v6(100, kPort, kOther6), NPF_STAT_PASS_NO_FLOW, s));
    }
    {
        MapState s = base().flow(flowKeyAny(kPort + 1), 1).cursor(1, 1, 0).post(1, 0, 40 * kPage, 512);
        v.push_back(redirect("second_flow_uses_its_own_ring", v4(100, kPort + 1), primary(kOff4, 100, 40 * kPage, 0, 1),
                             s));
    }
    v.push_back(pass("flow_id_out_of_range", v4(100), NPF_STAT_PASS_BAD_FLOW,
                     base().noFlows().flow(flowKeyAny(kPort), NPF_MAX_FLOWS)));
    v.push_back(pass("flow_id_huge", v4(100), NPF_STAT_PASS_BAD_FLOW, base().noFlows().flow(flowKeyAny(kPort), ~0u)));
    v.push_back(redirect("flow_id_last", v4(100), primary(kOff4, 100, 64 * kPage, 0, NPF_MAX_FLOWS - 1),
                         base().noFlows()
                             .flow(flowKeyAny(kPort), NPF_MAX_FLOWS - 1)
                             .cursor(NPF_MAX_FLOWS - 1, 1, 0)
                             .post(NPF_MAX_FLOWS - 1, 0, 64 * kPage, 512)));

    // An entry whose id was handed to another flow since (its gen is older
    // than the cursor's): passed untouched, nothing claimed.
    v.push_back(pass("flow_generation_stale", v4(100), NPF_STAT_PASS_BAD_FLOW,
                     base().noFlows().flow(flowKeyAny(kPort), 0, 1)));
    // Sockets bound, but no engine serves the flow yet (its cursor never
    // became NPF_CURSOR_F_SERVED): fail open, nothing claimed.
    v.push_back(pass("flow_not_served", v4(100), NPF_STAT_PASS_NO_SOCKET,
                     MapState{}.flow(flowKeyAny(kPort), 0).socketsOn(0)));

    // ---- generations: whose counters ---------------------------------------------------
    // A flow's outcomes count into its npf_flow_stats entry only while the
    // entry is of the flow entry's generation. Decided before the ring's gen
    // is checked (too big, queue, sockets, checksum), a stale entry's
    // outcome counts in npf_stats and for no flow.
    {
        MapState cur = base().generation(0, 3).noFlows().flow(flowKeyAny(kPort), 0, 3);
        v.push_back(redirect("flow_generation_current_counts", v4(100), {0, 0, kOff4, 0, 100, 2 * kPage, true, 3}, cur));
        v.push_back(pass("flow_generation_current_too_big", v4(NPF_MAX_PAYLOAD + 1), NPF_STAT_PASS_TOO_BIG, cur));
        // The low 16 bits of the generation in npf_meta.gen; the entry compares all 32.
        MapState big = base().generation(0, 0x10005).noFlows().flow(flowKeyAny(kPort), 0, 0x10005);
        v.push_back(redirect("flow_generation_above_16_bits_counts", v4(100), {0, 0, kOff4, 0, 100, 2 * kPage, true, 5},
                             big));
        v.push_back(pass("flow_generation_16_bit_alias_stale", v4(100), NPF_STAT_PASS_BAD_FLOW,
                         base().generation(0, 0x10005).noFlows().flow(flowKeyAny(kPort), 0, 5)));
    }
    {
        // The flow entry of gen 1, the id (ring, stats entry) of gen 0.
        MapState stale = base().noFlows().flow(flowKeyAny(kPort), 0, 1);
        v.push_back(noFlowCounts(pass("flow_generation_stale_too_big", v4(NPF_MAX_PAYLOAD + 1), NPF_STAT_PASS_TOO_BIG, stale)));
        v.push_back(noFlowCounts(drop("flow_generation_stale_bad_checksum", corrupt(v4(100), 14 + 10), NPF_STAT_DROP_CSUM,
                                      stale, {})));
        v.push_back(noFlowCounts(pass("flow_generation_stale_no_socket", v4(100), NPF_STAT_PASS_NO_SOCKET,
                                      MapState(stale).noSockets())));
        v.push_back(noFlowCounts(pass("flow_generation_stale_bad_queue", v4(100), NPF_STAT_PASS_BAD_QUEUE, stale,
                                      NPF_MAX_QUEUES)));
    }
    {
        // Id 0 was handed from the flow on kPort (gen 1) to the one on kPort + 1
        // (gen 2), and XDP still finds the old entry (a run that looked it up
        // before the hand-over): the old flow's datagrams count for no flow,
        // the new flow's into the id's fresh entry.
        MapState s = MapState{}
                         .generation(0, 2)
                         .flow(flowKeyAny(kPort), 0, 1)
                         .flow(flowKeyAny(kPort + 1), 0, 2)
                         .cursor(0, 2, 0)
                         .post(0, 0, 2 * kPage, 2048)
                         .post(0, 1, 3 * kPage, 2048)
                         .socketsOn(0);
        Case c{"flow_id_handed_over_old_and_new_datagrams", s, {},
               {{NPF_STAT_REDIR_PRIMARY, 2}, {NPF_STAT_PASS_BAD_FLOW, 1}, {NPF_STAT_DROP_CSUM, 1},
                {NPF_STAT_PASS_TOO_BIG, 1}, {NPF_STAT_DROP_RNR, 1}},
               {{0, 2}}};
        c.perFlow = PerFlow{{0, {{NPF_STAT_REDIR_PRIMARY, 2}, {NPF_STAT_DROP_RNR, 1}}}};
        c.sends.push_back({v4(100, kPort + 1), 0, XDP_REDIRECT, MetaExpect{0, 0, kOff4, 0, 100, 2 * kPage, true, 2}});
        c.sends.push_back({v4(100), 0, XDP_PASS, std::nullopt});                      // old: pass_bad_flow
        c.sends.push_back({corrupt(v4(100), 14 + 10), 0, XDP_DROP, std::nullopt});    // old: drop_csum, no flow's
        c.sends.push_back({v4(NPF_MAX_PAYLOAD + 1), 0, XDP_PASS, std::nullopt});      // old: pass_too_big, no flow's
        c.sends.push_back({v4(100, kPort + 1), 0, XDP_REDIRECT, MetaExpect{0, 0, kOff4, 1, 100, 3 * kPage, true, 2}});
        c.sends.push_back({v4(100, kPort + 1), 0, XDP_DROP, std::nullopt});           // new: drop_rnr
        v.push_back(c);
    }
    {
        // Two flows, each with its own entry: one's outcomes never land in the other's.
        MapState s = base().flow(flowKeyAny(kPort + 1), 7).cursor(7, 0, 0);
        Case c{"two_flows_count_apart", s, {}, {{NPF_STAT_REDIR_PRIMARY, 1}, {NPF_STAT_DROP_RNR, 2}}, {{0, 1}}};
        c.perFlow = PerFlow{{0, {{NPF_STAT_REDIR_PRIMARY, 1}, {NPF_STAT_DROP_RNR, 1}}}, {7, {{NPF_STAT_DROP_RNR, 1}}}};
        c.sends.push_back({v4(100, kPort + 1), 0, XDP_DROP, std::nullopt});
        c.sends.push_back({v4(100), 0, XDP_REDIRECT, primary(kOff4, 100)});
        c.sends.push_back({v4(100), 0, XDP_DROP, std::nullopt});
        v.push_back(c);
    }

    // ---- checksums -----------------------------------------------------------------------
    v.push_back(drop("ipv4_bad_header_checksum", corrupt(v4(100), 14 + 10), NPF_STAT_DROP_CSUM, base(), {}));
    v.push_back(drop("ipv4_bad_header_checksum_options",
                     corrupt(PacketBuilder().eth().ipv4({.options = nops(12)}).udp().payloadPattern(64).build(), 14 + 30),
                     NPF_STAT_DROP_CSUM, base(), {}));
    std::vector<uint8_t> zero6 = v6(100);
    zero6[14 + 40 + 6] = zero6[14 + 40 + 7] = 0;
    v.push_back(drop("ipv6_zero_udp_checksum", zero6, NPF_STAT_DROP_CSUM, base(), {}));
    v.push_back(redirect("ipv4_zero_udp_checksum_is_none",
                         PacketBuilder().eth().ipv4().udp({.dport = kPort, .checksum = false}).payloadPattern(100).build(),
                         {NPF_META_F_NO_CSUM, 0, kOff4, 0, 100, 2 * kPage}));
    // XDP does not read the payload: a corrupt one is steered, and meta.csum
    // makes the service's check fail.
    v.push_back(redirect("ipv4_payload_corrupt_steered", corrupt(v4(100), kOff4 + 7),
                         {0, 0, kOff4, 0, 100, 2 * kPage, false}));
    v.push_back(redirect("ipv6_payload_corrupt_steered", corrupt(v6(101), kOff6 + 100),
                         {0, 0, kOff6, 0, 101, 2 * kPage, false}));
    v.push_back(redirect("ipv4_udp_checksum_field_corrupt", corrupt(v4(100), kOff4 - 1),
                         {0, 0, kOff4, 0, 100, 2 * kPage, false}));

    // ---- post ring -----------------------------------------------------------------------
    v.push_back(drop("no_post_rnr", v4(100), NPF_STAT_DROP_RNR,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 0, 0).socketsOn(0), {}));
    v.push_back(drop("no_post_rnr_at_cons_5", v4(100), NPF_STAT_DROP_RNR,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 5, 5).socketsOn(0), {}));
    v.push_back(drop("prod_behind_cons_rnr", v4(100), NPF_STAT_DROP_RNR,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 3, 5).post(0, 5, 0, 4096).socketsOn(0), {}));
    v.push_back(drop("bad_desc_outside_region", v4(100), NPF_STAT_DROP_BAD_DESC,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, kRegion - 100, 200).socketsOn(0),
                     {{0, 1}}));
    v.push_back(drop("bad_desc_offset_past_region", v4(100), NPF_STAT_DROP_BAD_DESC,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, kRegion, 1).socketsOn(0), {{0, 1}}));
    v.push_back(drop("bad_desc_offset_plus_len_overflows", v4(100), NPF_STAT_DROP_BAD_DESC,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, ~0ull - 50, 100).socketsOn(0),
                     {{0, 1}}));
    v.push_back(drop("bad_desc_len_larger_than_region", v4(100), NPF_STAT_DROP_BAD_DESC,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, 0, kRegion + 1).socketsOn(0),
                     {{0, 1}}));
    v.push_back(drop("prod_minus_cons_beyond_ring", v4(100), NPF_STAT_DROP_BAD_DESC,
                     MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, NPF_POST_RING_SIZE + 1, 0).post(0, 0, 0, 4096).socketsOn(0),
                     {{0, 1}}));
    v.push_back(redirect("prod_minus_cons_equals_ring", v4(100), primary(kOff4, 100, 0),
                         MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, NPF_POST_RING_SIZE, 0).post(0, 0, 0, 4096).socketsOn(0)));
    v.push_back(redirect("desc_ends_at_region_end", v4(100), primary(kOff4, 100, kRegion - 2048),
                         MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, kRegion - 2048, 2048).socketsOn(0)));
    {
        MapState s = MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 13, 10).socketsOn(0);
        s.post(0, 10, 0, 512).post(0, 11, 3 * kPage, 512).post(0, 12, 7 * kPage + 100, 512);
        Case c{"seq_increments_then_rnr", s, {}, {{NPF_STAT_REDIR_PRIMARY, 3}, {NPF_STAT_DROP_RNR, 1}}, {{0, 13}}};
        c.sends.push_back({v4(100), 0, XDP_REDIRECT, primary(kOff4, 100, 0, 10)});
        c.sends.push_back({v4(200), 0, XDP_REDIRECT, primary(kOff4, 200, 3 * kPage, 11)});
        c.sends.push_back({v6(300), 0, XDP_REDIRECT, primary(kOff6, 300, 7 * kPage + 100, 12)});
        c.sends.push_back({v4(100), 0, XDP_DROP, std::nullopt});
        v.push_back(c);
    }
    {
        constexpr uint64_t kStart = NPF_POST_RING_SIZE - 2;
        MapState s = MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, kStart + 4, kStart).socketsOn(0);
        Case c{"cursor_wraps_ring", {}, {}, {{NPF_STAT_REDIR_PRIMARY, 4}}, {{0, kStart + 4}}};
        for (uint64_t i = 0; i < 4; i++) {
            s.post(0, kStart + i, (10 + i) * kPage, 1024);
            c.sends.push_back({v4(100), 0, XDP_REDIRECT,
                               primary(kOff4, 100, (10 + i) * kPage, static_cast<uint32_t>(kStart + i))});
        }
        c.setup = s;
        v.push_back(c);
    }
    {
        // meta.seq carries the low 32 bits of the 64-bit seq.
        constexpr uint64_t kStart = 0xffffffffull;
        MapState s = MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, kStart + 2, kStart).socketsOn(0);
        s.post(0, kStart, 0, 1024).post(0, kStart + 1, kPage, 1024);
        Case c{"seq_32bit_wrap_in_meta", s, {}, {{NPF_STAT_REDIR_PRIMARY, 2}}, {{0, kStart + 2}}};
        c.sends.push_back({v4(100), 0, XDP_REDIRECT, primary(kOff4, 100, 0, 0xffffffffu)});
        c.sends.push_back({v4(100), 0, XDP_REDIRECT, primary(kOff4, 100, kPage, 0)});
        v.push_back(c);
    }
    {
        MapState s = MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 2, 0).post(0, 0, kRegion, 64).post(0, 1, kPage, 64).socketsOn(0);
        Case c{"bad_desc_consumed_then_next_post_used", s, {}, {{NPF_STAT_DROP_BAD_DESC, 1}, {NPF_STAT_REDIR_PRIMARY, 1}},
               {{0, 2}}};
        c.sends.push_back({v4(10), 0, XDP_DROP, std::nullopt});
        c.sends.push_back({v4(10), 0, XDP_REDIRECT, primary(kOff4, 10, kPage, 1)});
        v.push_back(c);
    }

    // ---- residency: primary vs backup -----------------------------------------------------------
    {
        // 2000 bytes at page 5 + 3000: pages 5 and 6.
        constexpr uint64_t kOff = 5 * kPage + 3000;
        auto s = [&] { return MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, kOff, 4096).socketsOn(0); };
        v.push_back(redirect("two_pages_all_resident", v4(2000), primary(kOff4, 2000, kOff), s()));
        v.push_back(redirect("two_pages_listed_resident", v4(2000), primary(kOff4, 2000, kOff), s().resident({5, 6})));
        v.push_back(redirect("second_page_missing_backup", v4(2000), {NPF_META_F_BACKUP, 0, kOff4, 0, 2000, kOff},
                             s().resident({5})));
        v.push_back(redirect("first_page_missing_backup", v4(2000), {NPF_META_F_BACKUP, 0, kOff4, 0, 2000, kOff},
                             s().resident({6})));
        v.push_back(redirect("nothing_resident_backup", v4(2000), {NPF_META_F_BACKUP, 0, kOff4, 0, 2000, kOff},
                             s().resident({})));
        v.push_back(redirect("ipv6_nothing_resident_backup", v6(2000), {NPF_META_F_BACKUP, 0, kOff6, 0, 2000, kOff},
                             s().resident({})));
        // Only the bytes that will be written count: 1000 bytes stay in page 5.
        v.push_back(redirect("only_written_pages_count", v4(1000), primary(kOff4, 1000, kOff), s().resident({5})));
        // The buffer reaches page 8; the payload only pages 5 and 6.
        v.push_back(redirect("buffer_pages_beyond_payload_do_not_count", v4(2000), primary(kOff4, 2000, kOff),
                             MapState{}
                                 .flow(flowKeyAny(kPort), 0)
                                 .cursor(0, 1, 0)
                                 .post(0, 0, kOff, 3 * kPage)
                                 .socketsOn(0)
                                 .resident({5, 6})));
    }
    v.push_back(redirect("zero_length_payload", v4(0), primary(kOff4, 0)));
    v.push_back(redirect("zero_length_payload_nothing_resident", v4(0), primary(kOff4, 0), base().resident({})));
    v.push_back(redirect("payload_longer_than_buffer_truncated", v4(3000), {NPF_META_F_TRUNCATED, 0, kOff4, 0, 2048, 2 * kPage}));
    v.push_back(redirect("zero_length_buffer_truncated", v4(10), {NPF_META_F_TRUNCATED, 0, kOff4, 0, 0, 3 * kPage},
                         MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, 3 * kPage, 0).socketsOn(0)));
    {
        // Truncated to 1000 bytes that stay in resident page 5; the rest would have hit page 6.
        constexpr uint64_t kOff = 5 * kPage + 3000;
        MapState s = MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, kOff, 1000).socketsOn(0).resident({5});
        v.push_back(redirect("truncated_only_buffer_pages_count", v4(3000), {NPF_META_F_TRUNCATED, 0, kOff4, 0, 1000, kOff}, s));
        s.resident({});
        v.push_back(redirect("truncated_and_backup", v4(3000),
                             {NPF_META_F_TRUNCATED | NPF_META_F_BACKUP, 0, kOff4, 0, 1000, kOff}, s));
    }
    v.push_back(redirect("large_linear_payload", v4(3400), primary(kOff4, 3400, 0),
                         MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, 0, 4096).socketsOn(0)));

    // ---- multi-buffer (jumbo) packets ------------------------------------------------------------
    // test_run keeps at most PAGE_SIZE - XDP_PACKET_HEADROOM - tailroom (3520) bytes linear
    // and puts the rest in page-sized frags, as veth does: every packet here is multi-buffer
    // (a 9014-byte frame: 3520 linear + 4096 + 1398). The headers are in the linear part; the
    // lengths are checked against the whole packet (bpf_xdp_get_buff_len). test_run builds
    // frags for any XDP program; that a driver may hand npf_xdp multi-buffer packets at all
    // is the loader's BPF_F_XDP_HAS_FRAGS (AttachesNativeToVethWithMtu9000 below; the engine tests attach it
    // natively to a veth with MTU 9000).
    {
        // A 3-page buffer at page 5 + 3500: an 8972-byte payload touches pages 5..8.
        constexpr uint64_t kOff = 5 * kPage + 3500;
        auto s = [&](uint32_t len = 3 * kPage) {
            return MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, 1, 0).post(0, 0, kOff, len).socketsOn(0);
        };
        v.push_back(redirect("jumbo_2_buffers", v4(5000), primary(kOff4, 5000, kOff), s()));
        v.push_back(redirect("jumbo_mtu9000_ipv4", v4(8972), primary(kOff4, 8972, kOff), s()));
        v.push_back(redirect("jumbo_mtu9000_ipv6", v6(8952), primary(kOff6, 8952, kOff), s()));
        v.push_back(redirect("jumbo_vlan", PacketBuilder().eth().vlan({.vid = 7}).ipv4().udp().payloadPattern(8968).build(),
                             primary(kOff4 + 4, 8968, kOff), s()));
        v.push_back(redirect("jumbo_max_payload", v4(NPF_MAX_PAYLOAD), primary(kOff4, NPF_MAX_PAYLOAD, kOff), s()));
        v.push_back(pass("jumbo_max_payload_plus_one_too_big", v4(NPF_MAX_PAYLOAD + 1), NPF_STAT_PASS_TOO_BIG, s()));
        v.push_back(pass("jumbo_ipv6_too_big", v6(NPF_MAX_PAYLOAD + 100), NPF_STAT_PASS_TOO_BIG, s()));
        v.push_back(pass("udp_60000_bytes_too_big", v4(60000), NPF_STAT_PASS_TOO_BIG, s()));
        // Residency: the page the payload's last fragment lands on counts too.
        v.push_back(redirect("jumbo_last_page_missing_backup", v4(8972), {NPF_META_F_BACKUP, 0, kOff4, 0, 8972, kOff},
                             s().resident({5, 6, 7})));
        v.push_back(redirect("jumbo_first_page_missing_backup", v4(8972), {NPF_META_F_BACKUP, 0, kOff4, 0, 8972, kOff},
                             s().resident({6, 7, 8})));
        v.push_back(redirect("jumbo_pages_listed_resident", v4(8972), primary(kOff4, 8972, kOff), s().resident({5, 6, 7, 8})));
        v.push_back(redirect("jumbo_truncated_to_buffer", v4(8972), {NPF_META_F_TRUNCATED, 0, kOff4, 0, 2048, kOff},
                             s(2048).resident({5, 6})));
        v.push_back(redirect("jumbo_truncated_backup", v4(8972),
                             {NPF_META_F_TRUNCATED | NPF_META_F_BACKUP, 0, kOff4, 0, 6000, kOff}, s(6000).resident({5, 6})));
        // The payload's sum over every fragment + meta.csum verifies; a byte flipped in a fragment fails it.
        v.push_back(redirect("jumbo_payload_corrupt_in_fragment", corrupt(v4(8972), 8000),
                             {0, 0, kOff4, 0, 8972, kOff, false}, s()));
        v.push_back(redirect("jumbo_zero_udp_checksum_is_none",
                             PacketBuilder().eth().ipv4().udp({.dport = kPort, .checksum = false}).payloadPattern(8972).build(),
                             {NPF_META_F_NO_CSUM, 0, kOff4, 0, 8972, kOff}, s()));
        v.push_back(redirect("jumbo_ethernet_padding_ignored", padTo(v4(5000), 9000), primary(kOff4, 5000, kOff), s()));
        // Lengths against the whole packet, not the linear part: one byte short is malformed.
        v.push_back(pass("jumbo_ipv4_tot_len_beyond_packet",
                         PacketBuilder().eth().ipv4({.totLen = 20 + 8 + 8972 + 1}).udp().payloadPattern(8972).build(),
                         NPF_STAT_PASS_MALFORMED, s()));
        v.push_back(pass("jumbo_ipv6_payload_len_beyond_packet",
                         PacketBuilder().eth().ipv6({.payloadLen = 8 + 8952 + 1}).udp().payloadPattern(8952).build(),
                         NPF_STAT_PASS_MALFORMED, s()));
        v.push_back(pass("jumbo_udp_len_beyond_ip_payload",
                         PacketBuilder().eth().ipv4().udp({.len = 8 + 8972 + 1}).payloadPattern(8972).build(),
                         NPF_STAT_PASS_MALFORMED, s()));
        v.push_back(pass("jumbo_cut_in_last_fragment", udp4().payloadPattern(8972).truncate(9000).build(),
                         NPF_STAT_PASS_MALFORMED, s()));
        v.push_back(pass("jumbo_cut_in_linear_part", udp4().payloadPattern(8972).truncate(3000).build(),
                         NPF_STAT_PASS_MALFORMED, s()));
        v.push_back(redirect("jumbo_udp_len_shorter_than_ip_payload",
                             PacketBuilder().eth().ipv4().udp({.len = 8 + 4000}).payloadPattern(8972).build(),
                             primary(kOff4, 4000, kOff), s()));
        v.push_back(pass("jumbo_ipv4_fragment", PacketBuilder().eth().ipv4({.mf = true}).udp().payloadPattern(8000).build(),
                         NPF_STAT_PASS_FRAGMENT, s()));
        v.push_back(pass("jumbo_other_port", v4(8972, kPort + 1), NPF_STAT_PASS_NO_FLOW, s()));
        Case c = redirect("jumbo_existing_metadata_kept", v4(8972), primary(kOff4, 8972, kOff), s());
        c.sends[0].metaIn = 64;
        v.push_back(c);
    }

    // ---- sockets and queues: fail open before anything is consumed ---------------------------------
    v.push_back(pass("socket_primary_only", v4(100), NPF_STAT_PASS_NO_SOCKET, base().noSockets().socketsOn(0, true, false)));
    v.push_back(pass("socket_backup_only", v4(100), NPF_STAT_PASS_NO_SOCKET, base().noSockets().socketsOn(0, false, true)));
    v.push_back(pass("socket_none", v4(100), NPF_STAT_PASS_NO_SOCKET, base().noSockets()));
    v.push_back(pass("sockets_on_another_queue", v4(100), NPF_STAT_PASS_NO_SOCKET, base().noSockets().socketsOn(1)));
    v.push_back(redirect("rx_queue_2", v4(100), primary(kOff4, 100), base().noSockets().socketsOn(2), 2));
    v.push_back(redirect("rx_queue_last_configured", v4(100), primary(kOff4, 100), base().socketsOn(kQueues - 1),
                         kQueues - 1));
    v.push_back(pass("rx_queue_beyond_configured", v4(100), NPF_STAT_PASS_NO_SOCKET, base(), kQueues));
    v.push_back(pass("rx_queue_63", v4(100), NPF_STAT_PASS_NO_SOCKET, base(), NPF_MAX_QUEUES - 1));
    {
        // Metadata already in front of the frame (another XDP program's; the kernel
        // allows up to 255 bytes): it stays where it is, unread, and npf_meta goes
        // between it and the packet, at the start of the frame the AF_XDP reader
        // gets. Metadata that leaves npf_meta no headroom (XDP keeps 256 bytes, the
        // kernel's xdp_frame takes some) passes the datagram to the kernel, counted.
        for (size_t n : {4, 32, 160}) {
            Case c = redirect("existing_" + std::to_string(n) + "_byte_metadata_kept", v4(100),
                              primary(kOff4, 100));
            c.sends[0].metaIn = n;
            v.push_back(c);
        }
        Case c = pass("existing_200_byte_metadata_leaves_no_room", v4(100), NPF_STAT_PASS_META_FAIL);
        c.sends[0].metaIn = 200;
        v.push_back(c);
    }
    v.push_back(pass("rx_queue_beyond_max", v4(100), NPF_STAT_PASS_BAD_QUEUE, base(), NPF_MAX_QUEUES));
    return v;
}

// ---- the runner --------------------------------------------------------------------------

class XdpCase : public HarnessSuite<::testing::TestWithParam<Case>, kRegionPages, kQueues> {
protected:
    static void apply(XdpHarness& h, const MapState& s)
    {
        h.reset();
        for (const auto& [id, gen] : s.generations)
            h.newGeneration(id, gen);
        for (const FlowSpec& f : s.flows)
            h.addFlow(f.key, f.id, f.gen);
        for (const PostSpec& p : s.posts)
            h.setPost(p.flow, p.seq, p.offset, p.len);
        for (const CursorSpec& c : s.cursors)
            h.setCursor(c.flow, c.prod, c.cons);
        if (s.residentOnly) {
            for (uint64_t p : *s.residentOnly)
                h.setResident(p, true);
        } else {
            h.setAllResident(true);
        }
        for (const SocketSpec& k : s.sockets)
            h.setSockets(k.queue, k.primary, k.backup);
    }
};

TEST_P(XdpCase, Outcome)
{
    const Case& c = GetParam();
    // Attached to every failure of the case; passes once the program is fixed.
    XdpHarness& h = *harness_;
    apply(h, c.setup);
    const Counters before = h.counters();
    const std::vector<FlowCounters> flowsBefore = h.allFlowCounters();

    for (size_t i = 0; i < c.sends.size(); i++) {
        const Send& s = c.sends[i];
        SCOPED_TRACE("packet " + std::to_string(i) + " (" + std::to_string(s.pkt.size()) + " bytes, rx queue " +
                     std::to_string(s.queue) + ")\n" + hexdump(s.pkt));
        const std::vector<uint8_t> metaIn(s.metaIn, 0xa5);
        RunResult r = h.run(s.pkt, s.queue, metaIn);
        EXPECT_EQ(verdictName(r.verdict), std::string(verdictName(s.verdict)));
        // The program never writes packet bytes, whatever it decides.
        ASSERT_GE(r.out.size(), r.metaLen);
        EXPECT_TRUE(std::ranges::equal(r.packet(), s.pkt)) << "packet altered:\n" << hexdump(r.packet());
        EXPECT_EQ(r.metaLen, s.metaIn) << "an earlier program's metadata changed";
        if (s.verdict == XDP_PASS) {
            EXPECT_EQ(r.npfMetaLen, 0u) << "a passed packet carries npf_meta";
        }
        if (!s.meta)
            continue;
        ASSERT_EQ(r.npfMetaLen, sizeof(npf_meta));
        npf_meta m = *r.meta(); // the 32 bytes in front of the packet
        EXPECT_EQ(m.magic, NPF_META_MAGIC);
        EXPECT_EQ(m.version, NPF_META_VERSION);
        EXPECT_EQ(m.flags, s.meta->flags);
        EXPECT_EQ(m.flow, s.meta->flow);
        EXPECT_EQ(m.payload_off, s.meta->payloadOff);
        EXPECT_EQ(m.seq, s.meta->seq);
        EXPECT_EQ(m.len, s.meta->len);
        EXPECT_EQ(m.offset, s.meta->offset);
        EXPECT_EQ(m.gen, s.meta->gen);
        if (!(m.flags & NPF_META_F_NO_CSUM)) {
            const uint8_t* udp = s.pkt.data() + m.payload_off - 8;
            const uint32_t payload = (uint32_t(udp[4]) << 8 | udp[5]) - 8;
            const uint16_t sum = csumFold(csumPartial(udp + 8, payload) + m.csum);
            EXPECT_EQ(sum == 0xffff, s.meta->csumOk) << "payload sum + meta.csum = 0x" << std::hex << sum;
        }
        // Stamped: every backup frame, primary ones at seqs NPF_FAST_STAMP_EVERY apart.
        EXPECT_EQ(xsk::stamped(m), (m.flags & NPF_META_F_BACKUP) || m.seq % NPF_FAST_STAMP_EVERY == 0)
            << "seq " << m.seq;
        if (xsk::stamped(m)) {
            EXPECT_GE(xsk::steeredAtNs(m, r.endNs), r.startNs);
            EXPECT_LE(xsk::steeredAtNs(m, r.endNs), r.endNs);
        }
    }

    const Counters after = h.counters();
    uint64_t outcomes = 0;
    for (uint32_t k = 0; k < NPF_STAT_MAX; k++) {
        uint64_t delta = after[k] - before[k];
        uint64_t want = k == NPF_STAT_RX_TOTAL ? c.sends.size() : (c.counters.contains(k) ? c.counters.at(k) : 0);
        EXPECT_EQ(delta, want) << "counter " << statName(k);
        if (isOutcome(k))
            outcomes += delta;
    }
    EXPECT_EQ(outcomes, after[NPF_STAT_RX_TOTAL] - before[NPF_STAT_RX_TOTAL]) << "outcome counters do not add up";

    // Per-flow counters: the flow's outcomes in its own entry (of the
    // datagram's generation), nothing in any other entry.
    const std::vector<FlowCounters> flowsAfter = h.allFlowCounters();
    const PerFlow want = c.flowDeltas();
    for (const auto& [id, stats] : want) {
        ASSERT_LT(id, uint32_t{NPF_MAX_FLOWS}) << "case expects counters of flow id " << id;
        for (const auto& [k, n] : stats)
            ASSERT_TRUE(isFlowStat(k)) << "case expects " << statName(k) << " of flow " << id << ": not a flow counter";
    }
    for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++)
        for (uint32_t i = 0; i < NPF_FLOW_STAT_MAX; i++) {
            const uint32_t k = NPF_STAT_FLOW_FIRST + i;
            const uint64_t delta = flowsAfter[id][i] - flowsBefore[id][i];
            const uint64_t w = want.contains(id) && want.at(id).contains(k) ? want.at(id).at(k) : 0;
            EXPECT_EQ(delta, w) << "flow " << id << "'s " << statName(k);
        }

    for (const CursorSpec& cs : c.setup.cursors) {
        npf_cursor cur = h.cursor(cs.flow);
        uint64_t want = c.consAfter.contains(cs.flow) ? c.consAfter.at(cs.flow) : cs.cons;
        EXPECT_EQ(cur.cons, want) << "cons of flow " << cs.flow;
        EXPECT_EQ(cur.prod, cs.prod) << "prod of flow " << cs.flow << " changed";
    }
    for (const auto& [flow, cons] : c.consAfter) {
        bool listed = false;
        for (const CursorSpec& cs : c.setup.cursors)
            listed |= cs.flow == flow;
        EXPECT_TRUE(listed) << "case expects cons of flow " << flow << " without setting its cursor";
    }
}

INSTANTIATE_TEST_SUITE_P(Table, XdpCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// An XDP program of npf_xdp's kind (frags-aware, BPF_XDP) that answers XDP_TX.
Fd loadTxProgram()
{
    const bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = XDP_TX},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_XDP, .prog_flags = BPF_F_XDP_HAS_FRAGS);
    Fd fd(bpf_prog_load(BPF_PROG_TYPE_XDP, "itest_tx", "Dual BSD/GPL", insns, std::size(insns), &opts));
    if (!fd)
        throwErrno("load an XDP_TX program");
    return fd;
}

// A program chained behind npf_xdp (npf_next; npfctl attach --then) gets
// every packet of the table that npf passes, as it came, and its verdict
// (XDP_TX here) is final; what npf redirects or drops never reaches it. npf's
// counters move as without it.
class XdpChained : public XdpCase {};

TEST_F(XdpChained, WhatNpfPassesGoesToTheNextProgram)
{
    XdpHarness& h = *harness_;
    const Fd tx = loadTxProgram();
    h.chain(tx.get());
    struct Unchain {
        XdpHarness& h;
        ~Unchain() { h.chain(-1); }
    } unchain{h};
    for (const Case& c : cases()) {
        SCOPED_TRACE(c.name);
        apply(h, c.setup);
        const Counters before = h.counters();
        for (const Send& s : c.sends) {
            const std::vector<uint8_t> metaIn(s.metaIn, 0xa5);
            RunResult r = h.run(s.pkt, s.queue, metaIn);
            const int want = s.verdict == XDP_PASS ? XDP_TX : s.verdict;
            EXPECT_EQ(verdictName(r.verdict), std::string(verdictName(want)));
            ASSERT_GE(r.out.size(), r.metaLen);
            EXPECT_TRUE(std::ranges::equal(r.packet(), s.pkt)) << "packet altered";
            EXPECT_EQ(r.metaLen, s.metaIn) << "an earlier program's metadata changed";
            if (s.verdict == XDP_PASS) {
                EXPECT_EQ(r.npfMetaLen, 0u) << "the next program got npf_meta";
            }
        }
        const Counters after = h.counters();
        for (uint32_t k = 0; k < NPF_STAT_MAX; k++) {
            const uint64_t want = k == NPF_STAT_RX_TOTAL ? c.sends.size() : (c.counters.contains(k) ? c.counters.at(k) : 0);
            EXPECT_EQ(after[k] - before[k], want) << "counter " << statName(k);
        }
    }
}

// A driver hands multi-buffer packets only to a program loaded with
// BPF_F_XDP_HAS_FRAGS (Skeleton sets it: LoadConfig::frags), and veth refuses
// native XDP without it once the peer's MTU is above ~3.5 KB: attach npf_xdp
// natively to a veth whose ends have MTU 9000.
TEST(XdpProgram, AttachesNativeToVethWithMtu9000)
{
    if (!isRoot())
        GTEST_SKIP() << "needs root (BPF, netns)";
    VethPair veth(VethOptions{.mtu = 9000});
    dataplane::Skeleton skel = dataplane::Skeleton::open({.queues = 1});
    skel.load();
    NetnsGuard in(veth.rxNs());
    const int ifindex = static_cast<int>(if_nametoindex(veth.rxIf().c_str()));
    ASSERT_GT(ifindex, 0);
    const int rc = bpf_xdp_attach(ifindex, bpf_program__fd(skel->progs.npf_xdp), XDP_FLAGS_DRV_MODE, nullptr);
    EXPECT_EQ(rc, 0) << "native attach at MTU 9000: " << std::strerror(-rc)
                     << " (npf_xdp must be loaded frags-aware: jumbo frames arrive in several buffers)";
    if (rc == 0) {
        EXPECT_EQ(bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, nullptr), 0);
    }
}

// test_run refuses frames shorter than ETH_HLEN (as drivers never deliver
// them), so the parser's own Ethernet bound cannot be reached from here.
TEST_F(XdpCase, ShortFrameRefused)
{
    XdpHarness& h = *harness_;
    apply(h, base());
    const Counters before = h.counters();
    const std::vector<FlowCounters> flowsBefore = h.allFlowCounters();
    auto pkt = udp4().payloadPattern(64).truncate(13).build();
    try {
        h.run(pkt, 0);
        ADD_FAILURE() << "test_run accepted a 13-byte frame: add it to the case table";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EINVAL) << e.what();
    }
    EXPECT_EQ(h.counters(), before);
    EXPECT_EQ(h.allFlowCounters(), flowsBefore);
}

// Two threads (test_run runs the program on the calling CPU) race for one
// flow's posts: every post is claimed exactly once, nothing past prod.
TEST_F(XdpCase, ConcurrentClaimsAreUnique)
{
    XdpHarness& h = *harness_;
    MapState s = MapState{}.flow(flowKeyAny(kPort), 0).cursor(0, NPF_POST_RING_SIZE, 0).socketsOn(0);
    for (uint64_t i = 0; i < NPF_POST_RING_SIZE; i++)
        s.post(0, i, (i % kRegionPages) * kPage, 64);
    apply(h, s);
    const Counters before = h.counters();
    const FlowCounters flowBefore = h.flowCounters(0);
    constexpr int kPerThread = 3000;
    std::vector<uint32_t> seqs[2];
    std::string errors[2];
    auto worker = [&](int t) {
        try {
            auto pkt = v4(32);
            for (int i = 0; i < kPerThread; i++) {
                RunResult r = h.run(pkt, 0);
                if (r.verdict == XDP_REDIRECT)
                    seqs[t].push_back(r.meta()->seq);
            }
        } catch (const std::exception& e) {
            errors[t] = e.what();
        }
    };
    std::thread a(worker, 0), b(worker, 1);
    a.join();
    b.join();
    ASSERT_EQ(errors[0] + errors[1], "");
    std::set<uint32_t> all(seqs[0].begin(), seqs[0].end());
    all.insert(seqs[1].begin(), seqs[1].end());
    EXPECT_EQ(all.size(), seqs[0].size() + seqs[1].size()) << "a post was claimed twice";
    EXPECT_EQ(all.size(), size_t{NPF_POST_RING_SIZE});
    if (!all.empty()) {
        EXPECT_EQ(*all.rbegin(), NPF_POST_RING_SIZE - 1u);
    }
    EXPECT_EQ(h.cursor(0).cons, uint64_t{NPF_POST_RING_SIZE});
    const Counters after = h.counters();
    auto d = [&](uint32_t k) { return after[k] - before[k]; };
    EXPECT_EQ(d(NPF_STAT_RX_TOTAL), 2u * kPerThread);
    EXPECT_EQ(d(NPF_STAT_REDIR_PRIMARY), uint64_t{NPF_POST_RING_SIZE});
    EXPECT_EQ(d(NPF_STAT_DROP_RNR) + d(NPF_STAT_DROP_CONTENDED), 2u * kPerThread - NPF_POST_RING_SIZE);
    // Each CPU's copy of the flow's entry took its own share: together, all of them.
    const FlowCounters flowAfter = h.flowCounters(0);
    for (uint32_t i = 0; i < NPF_FLOW_STAT_MAX; i++)
        EXPECT_EQ(flowAfter[i] - flowBefore[i], d(NPF_STAT_FLOW_FIRST + i)) << "flow 0's " << statName(NPF_STAT_FLOW_FIRST + i);
    std::printf("two threads: %zu + %zu claims, %llu contended drops\n", seqs[0].size(), seqs[1].size(),
                static_cast<unsigned long long>(d(NPF_STAT_DROP_CONTENDED)));
}

// Every flow is bounded by its own region and checked against its own
// bitmap (an npfd client's forged descriptor cannot reach another region):
// flow 0 is on the harness's region (kRegionPages, all resident), flow 1 on a
// 16-page region of its own where only page 2 is resident.
TEST_F(XdpCase, RegionsAreIsolated)
{
    XdpHarness& h = *harness_;
    constexpr uint16_t kPort1 = kPort + 1;
    constexpr uint64_t kSmallPages = 16;
    dataplane::ResidentMap small = dataplane::ResidentMap::create(kSmallPages);
    small.words()[0] = 1u << 2;
    auto setUp = [&](std::optional<uint64_t> regionSize, bool bind) {
        apply(h, base());
        h.addFlow(flowKeyAny(kPort1), 1, 0, regionSize);
        h.bindBitmap(1, bind ? &small : nullptr);
        h.setCursor(1, 1, 0);
    };
    struct Step {
        const char* name;
        uint64_t offset;
        uint32_t len;
        uint32_t stat;
    } steps[] = {
        // Inside flow 0's region, outside flow 1's: refused, the seq consumed.
        {"beyond_own_region", 100 * kPage, 512, NPF_STAT_DROP_BAD_DESC},
        {"straddles_own_end", kSmallPages * kPage - 100, 512, NPF_STAT_DROP_BAD_DESC},
        // Page 0 is resident in flow 0's bitmap but not in flow 1's.
        {"own_bitmap_not_resident", 0, 512, NPF_STAT_REDIR_BACKUP},
        {"own_bitmap_resident", 2 * kPage, 512, NPF_STAT_REDIR_PRIMARY},
    };
    for (const Step& st : steps) {
        SCOPED_TRACE(st.name);
        setUp(kSmallPages * kPage, true);
        h.setPost(1, 0, st.offset, st.len);
        const Counters before = h.counters();
        const FlowCounters flow0 = h.flowCounters(0), flow1 = h.flowCounters(1);
        RunResult r = h.run(v4(64, kPort1), 0);
        EXPECT_EQ(verdictName(r.verdict), std::string(verdictName(outcomeVerdict(st.stat))));
        EXPECT_EQ(h.counters()[st.stat] - before[st.stat], 1u);
        FlowCounters want1 = flow1;
        want1[st.stat - NPF_STAT_FLOW_FIRST]++;
        EXPECT_EQ(h.flowCounters(1), want1) << "flow 1's entry";
        EXPECT_EQ(h.flowCounters(0), flow0) << "flow 0's entry touched";
        EXPECT_EQ(h.cursor(1).cons, 1u);
        EXPECT_EQ(h.cursor(0).cons, 0u) << "flow 0 touched";
    }
    // No region bound (size 0, or no bitmap): fail open, nothing claimed.
    for (bool sized : {false, true}) {
        SCOPED_TRACE(sized ? "no_bitmap" : "region_size_0");
        setUp(sized ? std::optional<uint64_t>(kSmallPages * kPage) : std::optional<uint64_t>(0), sized ? false : true);
        h.setPost(1, 0, 2 * kPage, 512);
        const Counters before = h.counters();
        const FlowCounters flow1 = h.flowCounters(1);
        RunResult r = h.run(v4(64, kPort1), 0);
        EXPECT_EQ(r.verdict, XDP_PASS);
        EXPECT_EQ(h.counters()[NPF_STAT_PASS_NO_SOCKET] - before[NPF_STAT_PASS_NO_SOCKET], 1u);
        EXPECT_EQ(h.flowCounters(1)[NPF_STAT_PASS_NO_SOCKET - NPF_STAT_FLOW_FIRST] - flow1[NPF_STAT_PASS_NO_SOCKET - NPF_STAT_FLOW_FIRST], 1u);
        EXPECT_EQ(h.cursor(1).cons, 0u);
    }
}

// An id handed to a new flow (dataplane::addFlow: the next generation, and
// the id's npf_flow_stats entry zeroed with it) starts from zero, and a
// datagram XDP still finds the old flow entry for (a run that looked it up
// before the hand-over) counts in npf_stats but for no flow.
TEST_F(XdpCase, ReusedFlowIdStartsFromZero)
{
    XdpHarness& h = *harness_;
    apply(h, MapState{}
                 .generation(0, 1)
                 .flow(flowKeyAny(kPort), 0, 1)
                 .cursor(0, 2, 0)
                 .post(0, 0, 2 * kPage, 2048)
                 .post(0, 1, 3 * kPage, 2048)
                 .socketsOn(0));
    auto n = [](const FlowCounters& f, uint32_t stat) { return f[stat - NPF_STAT_FLOW_FIRST]; };
    // The old flow: two steered, one without a buffer, one too big.
    EXPECT_EQ(h.run(v4(100), 0).verdict, XDP_REDIRECT);
    EXPECT_EQ(h.run(v4(3000), 0).verdict, XDP_REDIRECT); // truncated to its 2 KiB buffer
    EXPECT_EQ(h.run(v4(100), 0).verdict, XDP_DROP);
    EXPECT_EQ(h.run(v4(NPF_MAX_PAYLOAD + 1), 0).verdict, XDP_PASS);
    const FlowCounters old = h.flowCounters(0);
    EXPECT_EQ(n(old, NPF_STAT_REDIR_PRIMARY), 2u);
    EXPECT_EQ(n(old, NPF_STAT_TRUNCATED), 1u);
    EXPECT_EQ(n(old, NPF_STAT_DROP_RNR), 1u);
    EXPECT_EQ(n(old, NPF_STAT_PASS_TOO_BIG), 1u);

    // Handed over to the flow on kPort + 1; the old entry stays findable.
    h.newGeneration(0, 2);
    h.addFlow(flowKeyAny(kPort + 1), 0, 2);
    EXPECT_EQ(h.flowCounters(0), FlowCounters{}) << "the new flow inherited the old one's counts";
    for (uint32_t g : h.flowStatsGens(0))
        EXPECT_EQ(g, 2u);
    h.setPost(0, 0, 4 * kPage, 2048);
    h.setCursor(0, 1, 0);

    // The old generation's datagrams, on every path that decides before the
    // ring's gen is read, and the one that reads it.
    struct Old {
        const char* name;
        std::vector<uint8_t> pkt;
        uint32_t queue;
        uint32_t stat;
    } olds[] = {
        {"too_big", v4(NPF_MAX_PAYLOAD + 1), 0, NPF_STAT_PASS_TOO_BIG},
        {"bad_checksum", corrupt(v4(100), 14 + 10), 0, NPF_STAT_DROP_CSUM},
        {"bad_queue", v4(100), NPF_MAX_QUEUES, NPF_STAT_PASS_BAD_QUEUE},
        {"no_socket", v4(100), 1, NPF_STAT_PASS_NO_SOCKET},
        {"ring_of_another_gen", v4(100), 0, NPF_STAT_PASS_BAD_FLOW},
    };
    for (const Old& o : olds) {
        SCOPED_TRACE(o.name);
        const Counters before = h.counters();
        RunResult r = h.run(o.pkt, o.queue);
        EXPECT_EQ(verdictName(r.verdict), std::string(verdictName(outcomeVerdict(o.stat))));
        EXPECT_EQ(h.counters()[o.stat] - before[o.stat], 1u);
        EXPECT_EQ(h.flowCounters(0), FlowCounters{}) << "an old datagram counted for the new flow";
    }
    EXPECT_EQ(h.cursor(0).cons, 0u) << "an old datagram claimed the new flow's buffer";

    // The new flow's own: counted from zero.
    EXPECT_EQ(h.run(v4(100, kPort + 1), 0).verdict, XDP_REDIRECT);
    EXPECT_EQ(h.run(v4(100, kPort + 1), 0).verdict, XDP_DROP);
    FlowCounters want{};
    want[NPF_STAT_REDIR_PRIMARY - NPF_STAT_FLOW_FIRST] = 1;
    want[NPF_STAT_DROP_RNR - NPF_STAT_FLOW_FIRST] = 1;
    EXPECT_EQ(h.flowCounters(0), want);
}

TEST(XdpCaseTable, NamesUniqueAndEnough)
{
    auto all = cases();
    std::map<std::string, int> seen;
    for (const Case& c : all)
        EXPECT_EQ(seen[c.name]++, 0) << "duplicate case " << c.name;
    EXPECT_GE(all.size(), 30u);
}

} // namespace
} // namespace npf::test
