// Validation of what a user types that reaches the maps: ports, addresses,
// interface names; mode names; the flow key layout XDP looks up; the names of
// the XDP counters.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "dataplane/flows.h"
#include "dataplane/iface.h"
#include "dataplane/mode.h"
#include "dataplane/stats.h"
#include "sys/error.h"

namespace npf::dataplane {
namespace {

TEST(Port, Valid)
{
    const std::pair<const char*, uint16_t> cases[] = {{"1", 1}, {"53", 53}, {"5000", 5000}, {"65535", 65535},
                                                      {"08080", 8080}};
    for (auto [s, v] : cases)
        EXPECT_EQ(parsePort(s), v) << s;
}

TEST(Port, Invalid)
{
    for (const char* s : {"", "0", "00000", "65536", "99999", "123456", "-1", "+5", "5e3", "0x50", "abc", " 80",
                          "80 ", "8 0", "1.5"}) {
        EXPECT_THROW(parsePort(s), ArgumentError) << "'" << s << "'";
    }
}

TEST(FlowSpec, AnyAddress)
{
    FlowSpec f = parseFlowSpec("5000");
    EXPECT_EQ(f.port, 5000);
    EXPECT_EQ(f.family, NPF_FAMILY_ANY);
    EXPECT_EQ(addrString(f), "");
    EXPECT_EQ(toString(f), "port 5000");
}

TEST(FlowSpec, Ipv4KeyLayout)
{
    FlowSpec f = parseFlowSpec("4791", "198.18.0.1");
    EXPECT_EQ(f.family, NPF_FAMILY_IPV4);
    npf_flow_key k = toKey(f);
    const uint8_t want[16] = {198, 18, 0, 1};
    EXPECT_EQ(std::memcmp(k.addr, want, 16), 0);
    EXPECT_EQ(k.port, htons(4791)); // network byte order, as XDP reads it from the header
    EXPECT_EQ(k.family, NPF_FAMILY_IPV4);
    EXPECT_EQ(k.pad, 0);
    EXPECT_EQ(fromKey(k), f);
    EXPECT_EQ(toString(f), "198.18.0.1 port 4791");
}

TEST(FlowSpec, Ipv6KeyLayout)
{
    FlowSpec f = parseFlowSpec("9000", "fd00::1:2");
    EXPECT_EQ(f.family, NPF_FAMILY_IPV6);
    npf_flow_key k = toKey(f);
    uint8_t want[16];
    ASSERT_EQ(inet_pton(AF_INET6, "fd00::1:2", want), 1);
    EXPECT_EQ(std::memcmp(k.addr, want, 16), 0);
    EXPECT_EQ(k.port, htons(9000));
    EXPECT_EQ(fromKey(k), f);
    EXPECT_EQ(addrString(f), "fd00::1:2");
}

TEST(FlowSpec, WildcardKeyIsAllZeroButPort)
{
    npf_flow_key k = toKey(parseFlowSpec("7"));
    npf_flow_key want{};
    want.port = htons(7);
    EXPECT_EQ(std::memcmp(&k, &want, sizeof(k)), 0);
}

TEST(FlowSpec, BadAddresses)
{
    for (const char* a : {"x", "198.18.0", "198.18.0.256", "1.2.3.4/24", "fd00:::1", "0.0.0.0", "::", "localhost",
                          " 198.18.0.1"})
        EXPECT_THROW(parseFlowSpec("5000", a), ArgumentError) << a;
    EXPECT_THROW(parseFlowSpec("0", "198.18.0.1"), ArgumentError);
    // Not the address before the NUL (found by tests/fuzz).
    EXPECT_THROW(parseFlowSpec("5000", std::string("198.18.0.1\0junk", 15)), ArgumentError);
    EXPECT_THROW(parseFlowSpec("5000", std::string("::f\0", 4)), ArgumentError);
}

TEST(Ifname, Validation)
{
    for (const char* ok : {"veth0", "eth0.100", "a", "enp0s31f6", "abcdefghijklmno"})
        EXPECT_NO_THROW(validateIfname(ok)) << ok;
    for (const char* bad : {"", ".", "..", "a/b", "../x", "a b", "a:b", "tab\tx", "abcdefghijklmnop", "nl\n"})
        EXPECT_THROW(validateIfname(bad), ArgumentError) << bad;
}

TEST(Mode, Other)
{
    EXPECT_STREQ(toString(otherMode(AttachMode::Native)), "skb");
    EXPECT_STREQ(toString(otherMode(AttachMode::Skb)), "native");
}

TEST(StatNames, MatchTheEnum)
{
    EXPECT_STREQ(kStatNames[NPF_STAT_RX_TOTAL], "rx_total");
    EXPECT_STREQ(kStatNames[NPF_STAT_PASS_NO_FLOW], "pass_no_flow");
    EXPECT_STREQ(kStatNames[NPF_STAT_PASS_NO_SOCKET], "pass_no_socket");
    EXPECT_STREQ(kStatNames[NPF_STAT_DROP_RNR], "drop_rnr");
    EXPECT_STREQ(kStatNames[NPF_STAT_REDIR_PRIMARY], "redir_primary");
    EXPECT_STREQ(kStatNames[NPF_STAT_REDIR_BACKUP], "redir_backup");
    EXPECT_STREQ(kStatNames[NPF_STAT_TRUNCATED], "truncated");
    std::set<std::string> unique(std::begin(kStatNames), std::end(kStatNames));
    EXPECT_EQ(unique.size(), static_cast<size_t>(NPF_STAT_MAX));
}

} // namespace
} // namespace npf::dataplane
