// npfd's flow claims: overlapping flows of a port (the same address, or a
// wildcard and any address) belong to one client at most; flows on
// different addresses of a port are separate (pods on their own addresses);
// a client may hold a port for several addresses; releasing frees;
// interfaces are separate.
#include <gtest/gtest.h>

#include "daemon/daemon.h"
#include "engine/service.h"
#include "daemon/flow_claims.h"

namespace npf::daemon {
namespace {

const Session* session(uintptr_t n) { return reinterpret_cast<const Session*>(n); } // identities only

TEST(FlowClaims, OverlappingFlowsAreOneClientsDistinctAddressesAreNot)
{
    FlowClaims c;
    Iface eth0, eth1;
    const dataplane::FlowSpec any = dataplane::parseFlowSpec("5000"), one = dataplane::parseFlowSpec("5000", "198.18.0.1"),
                        two = dataplane::parseFlowSpec("5000", "198.18.0.2"),
                        three = dataplane::parseFlowSpec("5000", "198.18.0.3"), other = dataplane::parseFlowSpec("5001");
    const Session *a = session(0x10), *b = session(0x20);
    EXPECT_EQ(c.claim(eth0, one, a), nullptr);
    EXPECT_EQ(c.claim(eth0, one, a), a) << "the same flow twice";
    EXPECT_EQ(c.claim(eth0, two, a), nullptr) << "another address of its port";
    EXPECT_EQ(c.claim(eth0, any, b), a) << "a wildcard over another client's address";
    EXPECT_EQ(c.claim(eth0, two, b), a) << "the same address";
    EXPECT_EQ(c.claim(eth0, three, b), nullptr) << "another address of the port: another pod's";
    EXPECT_EQ(c.claim(eth0, any, a), b) << "a wildcard over b's address";
    EXPECT_EQ(c.claim(eth0, other, b), nullptr) << "another port";
    EXPECT_EQ(c.claim(eth1, any, b), nullptr) << "the same port of another interface";

    c.release(eth0, three);
    c.release(eth0, one);
    EXPECT_EQ(c.claim(eth0, any, b), a) << "a still holds 198.18.0.2";
    c.release(eth0, two);
    EXPECT_EQ(c.claim(eth0, any, b), nullptr) << "free once its last flow is released";
    c.release(eth0, one); // not held: nothing happens
    EXPECT_EQ(c.claim(eth0, one, a), b) << "an address under b's wildcard";
}

TEST(FlowClaims, OverlapIsByPortAndAddress)
{
    const auto spec = [](const char* port, const char* addr = "") { return dataplane::parseFlowSpec(port, addr); };
    EXPECT_TRUE(overlap(spec("9000"), spec("9000")));
    EXPECT_TRUE(overlap(spec("9000"), spec("9000", "198.18.0.1")));
    EXPECT_TRUE(overlap(spec("9000", "fd00::1"), spec("9000")));
    EXPECT_TRUE(overlap(spec("9000", "198.18.0.1"), spec("9000", "198.18.0.1")));
    EXPECT_FALSE(overlap(spec("9000", "198.18.0.1"), spec("9000", "198.18.0.2")));
    EXPECT_FALSE(overlap(spec("9000", "198.18.0.1"), spec("9000", "fd00::1")));
    EXPECT_FALSE(overlap(spec("9000"), spec("9001")));
}

} // namespace
} // namespace npf::daemon
