#include "packet_builder.h"

#include <arpa/inet.h>

#include <cstdio>
#include <stdexcept>

namespace npf::test {

namespace {

void put8(std::vector<uint8_t>& b, size_t at, uint8_t v) { b[at] = v; }
void put16(std::vector<uint8_t>& b, size_t at, uint16_t v)
{
    b[at] = static_cast<uint8_t>(v >> 8);
    b[at + 1] = static_cast<uint8_t>(v);
}
void put32(std::vector<uint8_t>& b, size_t at, uint32_t v)
{
    put16(b, at, static_cast<uint16_t>(v >> 16));
    put16(b, at + 2, static_cast<uint16_t>(v));
}
void append(std::vector<uint8_t>& b, std::span<const uint8_t> bytes) { b.insert(b.end(), bytes.begin(), bytes.end()); }

template <class... Ts>
struct Overloaded : Ts... {
    using Ts::operator()...;
};

} // namespace

Mac macAddr(std::string_view text)
{
    Mac m{};
    unsigned v[6];
    std::string s(text);
    char tail;
    if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
        throw std::invalid_argument("not a MAC address: '" + s + "'");
    for (int i = 0; i < 6; i++) {
        if (v[i] > 0xff)
            throw std::invalid_argument("not a MAC address: '" + s + "'");
        m[i] = static_cast<uint8_t>(v[i]);
    }
    return m;
}

Ipv4Addr ipv4Addr(std::string_view text)
{
    Ipv4Addr a{};
    std::string s(text);
    if (inet_pton(AF_INET, s.c_str(), a.data()) != 1)
        throw std::invalid_argument("not an IPv4 address: '" + s + "'");
    return a;
}

Ipv6Addr ipv6Addr(std::string_view text)
{
    Ipv6Addr a{};
    std::string s(text);
    if (inet_pton(AF_INET6, s.c_str(), a.data()) != 1)
        throw std::invalid_argument("not an IPv6 address: '" + s + "'");
    return a;
}

uint32_t onesSum(std::span<const uint8_t> bytes, uint32_t sum)
{
    size_t i = 0;
    for (; i + 1 < bytes.size(); i += 2)
        sum += static_cast<uint32_t>(bytes[i]) << 8 | bytes[i + 1];
    if (i < bytes.size())
        sum += static_cast<uint32_t>(bytes[i]) << 8;
    return sum;
}

uint16_t foldChecksum(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

std::string hexdump(std::span<const uint8_t> bytes)
{
    std::string out;
    char buf[24];
    for (size_t i = 0; i < bytes.size(); i++) {
        if (i % 16 == 0) {
            if (i)
                out += '\n';
            std::snprintf(buf, sizeof(buf), "%04zx ", i);
            out += buf;
        }
        std::snprintf(buf, sizeof(buf), " %02x", bytes[i]);
        out += buf;
    }
    return out;
}

PacketBuilder& PacketBuilder::eth(EthSpec s)
{
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::vlan(VlanSpec s)
{
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::ipv4(Ipv4Spec s)
{
    if (s.options.size() > 40)
        throw std::invalid_argument("ipv4: " + std::to_string(s.options.size()) + " option bytes (at most 40)");
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::ipv6(Ipv6Spec s)
{
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::ipv6Ext(Ipv6ExtSpec s)
{
    if (s.type != kIpProtoHopOpts && s.type != kIpProtoRouting && s.type != kIpProtoDstOpts)
        throw std::invalid_argument("ipv6Ext: type " + std::to_string(s.type) +
                                    " (hop-by-hop 0, routing 43 or destination options 60)");
    if (s.data.size() + 2 > 255 * 8 + 8)
        throw std::invalid_argument("ipv6Ext: " + std::to_string(s.data.size()) + " data bytes do not fit");
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::ipv6Frag(Ipv6FragSpec s)
{
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::udp(UdpSpec s)
{
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::tcp(TcpSpec s)
{
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::icmp(IcmpSpec s)
{
    layers_.emplace_back(std::move(s));
    return *this;
}
PacketBuilder& PacketBuilder::payload(std::span<const uint8_t> bytes)
{
    layers_.emplace_back(Raw{{bytes.begin(), bytes.end()}});
    return *this;
}
PacketBuilder& PacketBuilder::payloadPattern(size_t n, uint8_t first)
{
    Raw r;
    r.bytes.resize(n);
    for (size_t i = 0; i < n; i++)
        r.bytes[i] = static_cast<uint8_t>(first + i);
    layers_.emplace_back(std::move(r));
    return *this;
}
PacketBuilder& PacketBuilder::truncate(size_t n)
{
    truncate_ = n;
    return *this;
}

std::vector<uint8_t> PacketBuilder::build() const
{
    std::vector<uint8_t> b;
    std::vector<size_t> start(layers_.size());

    // Pass 1: every header with the fields that need no other layer.
    for (size_t i = 0; i < layers_.size(); i++) {
        start[i] = b.size();
        std::visit(Overloaded{
                       [&](const EthSpec& s) {
                           append(b, s.dst);
                           append(b, s.src);
                           b.resize(b.size() + 2);
                       },
                       [&](const VlanSpec& s) {
                           b.resize(b.size() + 4);
                           put16(b, start[i], static_cast<uint16_t>((s.pcp & 7) << 13 | (s.dei ? 1 : 0) << 12 |
                                                                    (s.vid & 0xfff)));
                       },
                       [&](const Ipv4Spec& s) {
                           size_t opt = (s.options.size() + 3) / 4 * 4;
                           b.resize(b.size() + 20 + opt);
                           size_t at = start[i];
                           put8(b, at + 1, s.tos);
                           put16(b, at + 4, s.id);
                           put16(b, at + 6, static_cast<uint16_t>((s.df ? 0x4000 : 0) | (s.mf ? 0x2000 : 0) |
                                                                  (s.fragOffset & 0x1fff)));
                           put8(b, at + 8, s.ttl);
                           std::copy(s.src.begin(), s.src.end(), b.begin() + static_cast<long>(at + 12));
                           std::copy(s.dst.begin(), s.dst.end(), b.begin() + static_cast<long>(at + 16));
                           std::copy(s.options.begin(), s.options.end(), b.begin() + static_cast<long>(at + 20));
                       },
                       [&](const Ipv6Spec& s) {
                           b.resize(b.size() + 40);
                           size_t at = start[i];
                           put32(b, at, static_cast<uint32_t>(s.version & 0xf) << 28 |
                                            static_cast<uint32_t>(s.trafficClass) << 20 | (s.flowLabel & 0xfffff));
                           put8(b, at + 7, s.hopLimit);
                           std::copy(s.src.begin(), s.src.end(), b.begin() + static_cast<long>(at + 8));
                           std::copy(s.dst.begin(), s.dst.end(), b.begin() + static_cast<long>(at + 24));
                       },
                       [&](const Ipv6ExtSpec& s) {
                           size_t len = (s.data.size() + 2 + 7) / 8 * 8;
                           b.resize(b.size() + len);
                           put8(b, start[i] + 1, static_cast<uint8_t>(len / 8 - 1));
                           std::copy(s.data.begin(), s.data.end(), b.begin() + static_cast<long>(start[i] + 2));
                       },
                       [&](const Ipv6FragSpec& s) {
                           b.resize(b.size() + 8);
                           put16(b, start[i] + 2,
                                 static_cast<uint16_t>((s.offset & 0x1fff) << 3 | (s.more ? 1 : 0)));
                           put32(b, start[i] + 4, s.id);
                       },
                       [&](const UdpSpec& s) {
                           b.resize(b.size() + 8);
                           put16(b, start[i], s.sport);
                           put16(b, start[i] + 2, s.dport);
                       },
                       [&](const TcpSpec& s) {
                           b.resize(b.size() + 20);
                           size_t at = start[i];
                           put16(b, at, s.sport);
                           put16(b, at + 2, s.dport);
                           put32(b, at + 4, s.seq);
                           put32(b, at + 8, s.ack);
                           put8(b, at + 12, 5 << 4);
                           put8(b, at + 13, s.flags);
                           put16(b, at + 14, s.window);
                       },
                       [&](const IcmpSpec& s) {
                           b.resize(b.size() + 8);
                           size_t at = start[i];
                           put8(b, at, s.type);
                           put8(b, at + 1, s.code);
                           put16(b, at + 4, s.id);
                           put16(b, at + 6, s.seq);
                       },
                       [&](const Raw& r) { append(b, r.bytes); },
                   },
                   layers_[i]);
    }

    auto nextEtherType = [&](size_t i) -> std::optional<uint16_t> {
        if (i + 1 >= layers_.size())
            return std::nullopt;
        const Layer& n = layers_[i + 1];
        if (auto* v = std::get_if<VlanSpec>(&n))
            return v->tpid;
        if (std::holds_alternative<Ipv4Spec>(n))
            return kEthIpv4;
        if (std::holds_alternative<Ipv6Spec>(n))
            return kEthIpv6;
        return std::nullopt;
    };
    // Innermost IP layer before i: 4, 6 or 0.
    auto ipFamilyBefore = [&](size_t i) -> int {
        for (size_t j = i; j-- > 0;) {
            if (std::holds_alternative<Ipv4Spec>(layers_[j]))
                return 4;
            if (std::holds_alternative<Ipv6Spec>(layers_[j]))
                return 6;
        }
        return 0;
    };
    auto nextIpProto = [&](size_t i) -> std::optional<uint8_t> {
        if (i + 1 >= layers_.size())
            return kIpProtoNone;
        const Layer& n = layers_[i + 1];
        if (auto* e = std::get_if<Ipv6ExtSpec>(&n))
            return e->type;
        if (std::holds_alternative<Ipv6FragSpec>(n))
            return kIpProtoFragment;
        if (std::holds_alternative<UdpSpec>(n))
            return kIpProtoUdp;
        if (std::holds_alternative<TcpSpec>(n))
            return kIpProtoTcp;
        if (std::holds_alternative<IcmpSpec>(n))
            return ipFamilyBefore(i + 1) == 6 ? kIpProtoIcmpv6 : kIpProtoIcmp;
        if (std::holds_alternative<Ipv4Spec>(n))
            return 4; // IP in IP
        if (std::holds_alternative<Ipv6Spec>(n))
            return 41;
        return std::nullopt;
    };
    auto need = [](auto v, const char* what) {
        if (!v)
            throw std::invalid_argument(std::string(what) + ": cannot derive it from the next layer; set it");
        return *v;
    };
    // Ones' complement sum of the pseudo header of the IP layer around layer i.
    auto pseudoSum = [&](size_t i, uint8_t proto, uint32_t len) -> uint32_t {
        for (size_t j = i; j-- > 0;) {
            if (auto* v4 = std::get_if<Ipv4Spec>(&layers_[j]))
                return onesSum(v4->src, onesSum(v4->dst, proto + len));
            if (auto* v6 = std::get_if<Ipv6Spec>(&layers_[j]))
                return onesSum(v6->src, onesSum(v6->dst, proto + (len >> 16) + (len & 0xffff)));
        }
        throw std::invalid_argument("transport layer without an IP layer before it");
    };
    // The segment is what the length field says, within the frame (UDP; TCP
    // and ICMP pass the rest of the frame).
    auto l4Checksum = [&](size_t i, size_t csumAt, uint8_t proto, uint32_t pseudoLen) {
        std::span<const uint8_t> seg(b.data() + start[i], std::min<size_t>(b.size() - start[i], pseudoLen));
        uint16_t c = static_cast<uint16_t>(~foldChecksum(onesSum(seg, pseudoSum(i, proto, pseudoLen))));
        put16(b, csumAt, c);
        return c;
    };

    // Pass 2, innermost first: lengths, next-protocol fields, checksums.
    for (size_t i = layers_.size(); i-- > 0;) {
        size_t at = start[i];
        size_t toEnd = b.size() - at;
        std::visit(Overloaded{
                       [&](const EthSpec& s) { put16(b, at + 12, need(s.type ? s.type : nextEtherType(i), "eth type")); },
                       [&](const VlanSpec& s) { put16(b, at + 2, need(s.type ? s.type : nextEtherType(i), "vlan type")); },
                       [&](const Ipv4Spec& s) {
                           size_t hdr = 20 + (s.options.size() + 3) / 4 * 4;
                           if (toEnd > 0xffff && !s.totLen)
                               throw std::invalid_argument("ipv4: " + std::to_string(toEnd) + " bytes exceed tot_len");
                           put8(b, at, static_cast<uint8_t>((s.version & 0xf) << 4 | (s.ihl ? *s.ihl & 0xf : hdr / 4)));
                           put16(b, at + 2, s.totLen ? *s.totLen : static_cast<uint16_t>(toEnd));
                           put8(b, at + 9, need(s.proto ? s.proto : nextIpProto(i), "ipv4 proto"));
                           put16(b, at + 10, 0);
                           put16(b, at + 10, static_cast<uint16_t>(~foldChecksum(onesSum({b.data() + at, hdr}))));
                       },
                       [&](const Ipv6Spec& s) {
                           if (toEnd - 40 > 0xffff && !s.payloadLen)
                               throw std::invalid_argument("ipv6: " + std::to_string(toEnd - 40) +
                                                           " bytes exceed payload_len");
                           put16(b, at + 4, s.payloadLen ? *s.payloadLen : static_cast<uint16_t>(toEnd - 40));
                           put8(b, at + 6, need(s.nextHeader ? s.nextHeader : nextIpProto(i), "ipv6 next header"));
                       },
                       [&](const Ipv6ExtSpec& s) {
                           put8(b, at, need(s.nextHeader ? s.nextHeader : nextIpProto(i), "ipv6 ext next header"));
                       },
                       [&](const Ipv6FragSpec& s) {
                           put8(b, at, need(s.nextHeader ? s.nextHeader : nextIpProto(i), "ipv6 frag next header"));
                       },
                       [&](const UdpSpec& s) {
                           if (toEnd > 0xffff && !s.len)
                               throw std::invalid_argument("udp: " + std::to_string(toEnd) + " bytes exceed length");
                           uint16_t len = s.len ? *s.len : static_cast<uint16_t>(toEnd);
                           put16(b, at + 4, len);
                           put16(b, at + 6, 0);
                           if (s.checksum || ipFamilyBefore(i) == 6) {
                               if (l4Checksum(i, at + 6, kIpProtoUdp, len) == 0)
                                   put16(b, at + 6, 0xffff);
                           }
                       },
                       [&](const TcpSpec&) {
                           put16(b, at + 16, 0);
                           l4Checksum(i, at + 16, kIpProtoTcp, static_cast<uint32_t>(toEnd));
                       },
                       [&](const IcmpSpec&) {
                           put16(b, at + 2, 0);
                           if (ipFamilyBefore(i) == 6)
                               l4Checksum(i, at + 2, kIpProtoIcmpv6, static_cast<uint32_t>(toEnd));
                           else
                               put16(b, at + 2,
                                     static_cast<uint16_t>(~foldChecksum(onesSum({b.data() + at, toEnd}))));
                       },
                       [&](const Raw&) {},
                   },
                   layers_[i]);
    }

    if (truncate_ && *truncate_ < b.size())
        b.resize(*truncate_);
    return b;
}

} // namespace npf::test
