// The packet builder's lengths, next-protocol fields and checksums.
#include <gtest/gtest.h>

#include <stdexcept>

#include "packet_builder.h"

namespace npf::test {
namespace {

uint16_t rd16(const std::vector<uint8_t>& p, size_t o) { return static_cast<uint16_t>(p[o] << 8 | p[o + 1]); }

// Sum of a checksummed range plus pseudo header folds to 0xffff when valid.
uint16_t l4Verify(const std::vector<uint8_t>& p, size_t l3, size_t l4, uint8_t proto, bool v6)
{
    uint32_t len = static_cast<uint32_t>(p.size() - l4);
    uint32_t sum = proto + (len >> 16) + (len & 0xffff);
    size_t addrs = v6 ? l3 + 8 : l3 + 12, alen = v6 ? 32 : 8;
    sum = onesSum({p.data() + addrs, alen}, sum);
    return foldChecksum(onesSum({p.data() + l4, p.size() - l4}, sum));
}

TEST(PacketBuilder, Ipv4UdpLengthsAndChecksums)
{
    auto p = PacketBuilder().eth().vlan({.vid = 42}).ipv4({.options = {1, 1, 1}}).udp({.dport = 9}).payloadPattern(33).build();
    ASSERT_EQ(p.size(), 14u + 4 + 24 + 8 + 33);
    EXPECT_EQ(rd16(p, 12), kEth8021Q);
    EXPECT_EQ(rd16(p, 14) & 0xfff, 42);
    EXPECT_EQ(rd16(p, 16), kEthIpv4);
    EXPECT_EQ(p[18], 0x46);
    EXPECT_EQ(rd16(p, 20), 24 + 8 + 33);
    EXPECT_EQ(p[18 + 9], kIpProtoUdp);
    EXPECT_EQ(foldChecksum(onesSum({p.data() + 18, 24})), 0xffff);
    EXPECT_EQ(rd16(p, 42 + 2), 9);
    EXPECT_EQ(rd16(p, 42 + 4), 8 + 33);
    EXPECT_EQ(l4Verify(p, 18, 42, kIpProtoUdp, false), 0xffff);
    EXPECT_EQ(p[50], 0);
    EXPECT_EQ(p.back(), 32);
}

TEST(PacketBuilder, Ipv6ExtensionChain)
{
    auto p = PacketBuilder()
                 .eth()
                 .ipv6()
                 .ipv6Ext({.type = kIpProtoHopOpts, .data = {1, 4, 0, 0, 0, 0, 0}})
                 .ipv6Frag({.offset = 3, .more = true, .id = 0x01020304})
                 .udp()
                 .payloadPattern(10)
                 .build();
    ASSERT_EQ(p.size(), 14u + 40 + 16 + 8 + 8 + 10);
    EXPECT_EQ(rd16(p, 12), kEthIpv6);
    EXPECT_EQ(p[14] >> 4, 6);
    EXPECT_EQ(rd16(p, 18), 16 + 8 + 8 + 10);
    EXPECT_EQ(p[20], kIpProtoHopOpts);
    EXPECT_EQ(p[54], kIpProtoFragment);
    EXPECT_EQ(p[55], 1); // (16 / 8) - 1
    EXPECT_EQ(p[70], kIpProtoUdp);
    EXPECT_EQ(rd16(p, 72), 3 << 3 | 1);
    EXPECT_EQ(rd16(p, 78 + 4), 18);
    EXPECT_EQ(l4Verify(p, 14, 78, kIpProtoUdp, true), 0xffff);
}

TEST(PacketBuilder, OverridesAndTruncation)
{
    auto p = PacketBuilder().eth().ipv4({.ihl = 3, .totLen = 999}).udp({.len = 5}).payloadPattern(20).truncate(40).build();
    ASSERT_EQ(p.size(), 40u);
    EXPECT_EQ(p[14], 0x43);
    EXPECT_EQ(rd16(p, 16), 999);
    EXPECT_EQ(rd16(p, 34 + 4), 5);
    auto t = PacketBuilder().eth().ipv4().tcp({.dport = 80}).build();
    EXPECT_EQ(t[23], kIpProtoTcp);
    EXPECT_EQ(l4Verify(t, 14, 34, kIpProtoTcp, false), 0xffff);
    auto i = PacketBuilder().eth().ipv6().icmp({.type = 128}).payloadPattern(8).build();
    EXPECT_EQ(i[20], kIpProtoIcmpv6);
    EXPECT_EQ(l4Verify(i, 14, 54, kIpProtoIcmpv6, true), 0xffff);
}

TEST(PacketBuilder, RejectsWhatItCannotDerive)
{
    EXPECT_THROW(PacketBuilder().eth().payloadPattern(4).build(), std::invalid_argument);
    EXPECT_THROW(PacketBuilder().eth().ipv4().payloadPattern(4).build(), std::invalid_argument);
    EXPECT_THROW(PacketBuilder().ipv4({.options = std::vector<uint8_t>(41, 1)}), std::invalid_argument);
    EXPECT_THROW(ipv4Addr("198.18.0"), std::invalid_argument);
    EXPECT_EQ(macAddr("02:00:00:00:00:0a")[5], 10);
}

} // namespace
} // namespace npf::test
