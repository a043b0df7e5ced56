// Fluent builder of Ethernet frames: optional VLAN tags, IPv4 (options,
// fragments), IPv6 (extension headers), UDP/TCP/ICMP, payload bytes.
// Lengths, next-protocol fields and checksums are filled in by build();
// every one of them can be overridden to craft malformed packets, and the
// result can be truncated to N bytes.
//
//   auto pkt = PacketBuilder()
//                  .eth()
//                  .vlan({.vid = 7})
//                  .ipv4({.src = ipv4Addr("198.18.0.2"), .dst = ipv4Addr("198.18.0.1")})
//                  .udp({.sport = 1000, .dport = 4791})
//                  .payloadPattern(64)
//                  .build();
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace npf::test {

using Mac = std::array<uint8_t, 6>;
using Ipv4Addr = std::array<uint8_t, 4>;
using Ipv6Addr = std::array<uint8_t, 16>;

// Parse text addresses; throw std::invalid_argument naming the bad text.
Mac macAddr(std::string_view text);       // "02:00:00:00:00:01"
Ipv4Addr ipv4Addr(std::string_view text); // "198.18.0.1"
Ipv6Addr ipv6Addr(std::string_view text); // "fd00::1"

// EtherTypes and IP protocol numbers the builder derives on its own.
inline constexpr uint16_t kEthIpv4 = 0x0800;
inline constexpr uint16_t kEthArp = 0x0806;
inline constexpr uint16_t kEthIpv6 = 0x86dd;
inline constexpr uint16_t kEth8021Q = 0x8100;
inline constexpr uint16_t kEth8021AD = 0x88a8;
inline constexpr uint8_t kIpProtoHopOpts = 0;
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoRouting = 43;
inline constexpr uint8_t kIpProtoFragment = 44;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
inline constexpr uint8_t kIpProtoNone = 59;
inline constexpr uint8_t kIpProtoDstOpts = 60;

// Unset optionals are derived from the layers that follow (type, proto,
// next header, lengths); set them to override what goes on the wire.
struct EthSpec {
    Mac dst{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
    Mac src{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
    std::optional<uint16_t> type; // required when raw payload follows (e.g. kEthArp)
};

struct VlanSpec {
    uint16_t vid = 1; // 12 bits
    uint8_t pcp = 0;  // 3 bits
    bool dei = false;
    uint16_t tpid = kEth8021Q; // written as the EtherType of the layer before
    std::optional<uint16_t> type;
};

struct Ipv4Spec {
    Ipv4Addr src{198, 18, 0, 2};
    Ipv4Addr dst{198, 18, 0, 1};
    uint8_t tos = 0;
    uint8_t ttl = 64;
    uint16_t id = 0;
    bool df = false;
    bool mf = false;
    uint16_t fragOffset = 0;      // in 8-byte units, 13 bits
    std::vector<uint8_t> options; // padded with zeros (EOL) to a multiple of 4, at most 40
    std::optional<uint8_t> proto;
    std::optional<uint8_t> ihl;      // header-length field (32-bit words); bytes written stay 20 + options
    std::optional<uint16_t> totLen;
    uint8_t version = 4;
};

struct Ipv6Spec {
    Ipv6Addr src{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    Ipv6Addr dst{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    uint8_t trafficClass = 0;
    uint32_t flowLabel = 0; // 20 bits
    uint8_t hopLimit = 64;
    std::optional<uint8_t> nextHeader; // kIpProtoNone when nothing follows
    std::optional<uint16_t> payloadLen;
    uint8_t version = 6;
};

// Hop-by-hop (0), routing (43) or destination options (60) header: `data`
// follows the next-header and length bytes, zero-padded so the header is a
// multiple of 8 bytes (zero bytes are Pad1 options).
struct Ipv6ExtSpec {
    uint8_t type = kIpProtoHopOpts;
    std::vector<uint8_t> data;
    std::optional<uint8_t> nextHeader;
};

struct Ipv6FragSpec {
    uint16_t offset = 0; // in 8-byte units, 13 bits
    bool more = false;
    uint32_t id = 0;
    std::optional<uint8_t> nextHeader;
};

struct UdpSpec {
    uint16_t sport = 40000;
    uint16_t dport = 4791;
    std::optional<uint16_t> len;
    bool checksum = true; // false writes 0 (allowed over IPv4 only)
};

struct TcpSpec {
    uint16_t sport = 40000;
    uint16_t dport = 80;
    uint32_t seq = 0;
    uint32_t ack = 0;
    uint8_t flags = 0x02; // SYN
    uint16_t window = 65535;
};

// ICMP echo (ICMPv6 echo under IPv6: type 128/129 are chosen by the caller).
struct IcmpSpec {
    uint8_t type = 8;
    uint8_t code = 0;
    uint16_t id = 0;
    uint16_t seq = 0;
};

class PacketBuilder {
public:
    PacketBuilder& eth(EthSpec s = {});
    PacketBuilder& vlan(VlanSpec s = {});
    PacketBuilder& ipv4(Ipv4Spec s = {});
    PacketBuilder& ipv6(Ipv6Spec s = {});
    PacketBuilder& ipv6Ext(Ipv6ExtSpec s);
    PacketBuilder& ipv6Frag(Ipv6FragSpec s = {});
    PacketBuilder& udp(UdpSpec s = {});
    PacketBuilder& tcp(TcpSpec s = {});
    PacketBuilder& icmp(IcmpSpec s = {});
    PacketBuilder& payload(std::span<const uint8_t> bytes);
    // n bytes first, first + 1, ... (mod 256): recognisable in a hexdump.
    PacketBuilder& payloadPattern(size_t n, uint8_t first = 0);
    // Cut the built frame to at most n bytes (after lengths and checksums).
    PacketBuilder& truncate(size_t n);

    // Throws std::invalid_argument when a field cannot be derived or does not fit.
    std::vector<uint8_t> build() const;

private:
    struct Raw {
        std::vector<uint8_t> bytes;
    };
    using Layer = std::variant<EthSpec, VlanSpec, Ipv4Spec, Ipv6Spec, Ipv6ExtSpec, Ipv6FragSpec, UdpSpec,
                               TcpSpec, IcmpSpec, Raw>;
    std::vector<Layer> layers_;
    std::optional<size_t> truncate_;
};

// "0000  45 00 ..." lines of 16 bytes, for failure messages.
std::string hexdump(std::span<const uint8_t> bytes);

// RFC 1071 ones' complement sum folded to 16 bits, not inverted.
uint32_t onesSum(std::span<const uint8_t> bytes, uint32_t sum = 0);
uint16_t foldChecksum(uint32_t sum);

} // namespace npf::test
