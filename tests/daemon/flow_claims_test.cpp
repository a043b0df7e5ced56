// npfd's flow claims: a port of an interface belongs to one client at most,
// whatever the addresses; that client may hold it for several addresses;
// releasing the last flow frees the port; interfaces are separate.
#include <gtest/gtest.h>

#include "daemon/daemon.h"
#include "engine/service.h"
#include "daemon/flow_claims.h"

namespace npf::daemon {
namespace {

const Session* session(uintptr_t n) { return reinterpret_cast<const Session*>(n); } // identities only

TEST(FlowClaims, APortIsOneClientsWhateverTheAddress)
{
    FlowClaims c;
    Iface eth0, eth1;
    const dataplane::FlowSpec any = dataplane::parseFlowSpec("5000"), one = dataplane::parseFlowSpec("5000", "198.18.0.1"),
                        two = dataplane::parseFlowSpec("5000", "198.18.0.2"), other = dataplane::parseFlowSpec("5001");
    const Session *a = session(0x10), *b = session(0x20);
    EXPECT_EQ(c.claim(eth0, one, a), nullptr);
    EXPECT_EQ(c.claim(eth0, one, a), a) << "the same flow twice";
    EXPECT_EQ(c.claim(eth0, two, a), nullptr) << "another address of its port";
    EXPECT_EQ(c.claim(eth0, any, b), a) << "a wildcard over another client's address";
    EXPECT_EQ(c.claim(eth0, two, b), a);
    EXPECT_EQ(c.claim(eth0, other, b), nullptr) << "another port";
    EXPECT_EQ(c.claim(eth1, any, b), nullptr) << "the same port of another interface";

    c.release(eth0, one);
    EXPECT_EQ(c.claim(eth0, any, b), a) << "a still holds 198.18.0.2";
    c.release(eth0, two);
    EXPECT_EQ(c.claim(eth0, any, b), nullptr) << "free once its last flow is released";
    c.release(eth0, one); // not held: nothing happens
    EXPECT_EQ(c.claim(eth0, one, a), b);
}

} // namespace
} // namespace npf::daemon
