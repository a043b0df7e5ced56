// While npf_xdp is attached: traffic that is not a flow, and flow traffic with
// no AF_XDP socket bound, reaches the kernel stack unchanged, and the
// counters account for exactly the packets sent.
#include <bpf/bpf.h>

#include <chrono>

#include "fixture.h"
#include "npf/abi.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "udp.h"
#include "wait.h"

namespace npf::itest {
namespace {

using namespace std::chrono_literals;

// Only bounds a failure: a datagram that arrives ends the wait.
constexpr auto kRecvTimeout = test::kDeadline;

// Payloads a socket sends from the tx namespace: every byte value, sizes up
// to a full 1500-byte frame.
std::string binaryPayload(size_t len, int salt)
{
    std::string p(len, '\0');
    for (size_t i = 0; i < len; i++)
        p[i] = static_cast<char>((i * 7 + static_cast<size_t>(salt)) & 0xff);
    return p;
}

class TrafficTest : public ModeTest {
protected:
    void SetUp() override
    {
        ModeTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        RunResult r = rig().npfctl("attach " + ifname() + " --mode " + mode());
        ASSERT_EQ(r.status, kOk) << describe(r);
    }

    UdpSocket rxSocket(uint16_t port) { return UdpSocket(rig().veth().rxNs(), rig().rxAddr(), port); }
    UdpSocket txSocket() { return UdpSocket(rig().veth().txNs(), rig().veth().txAddr(), 0); }

    // The next datagram on s equals payload.
    void expectReceived(const UdpSocket& s, const std::string& payload)
    {
        std::optional<std::string> got = s.recv(kRecvTimeout);
        ASSERT_TRUE(got) << "no datagram on port " << s.port() << " (expected " << payload.size() << " bytes)";
        EXPECT_EQ(*got, payload) << "datagram on port " << s.port() << " changed";
    }

    // Called once every datagram sent was received: whatever else XDP let
    // through is on the socket already (XDP runs before the socket gets a
    // datagram), so a read that does not wait finds it; the counters catch
    // the rest. Nothing waits for quiet.
    void expectNothingMore(const UdpSocket& s)
    {
        std::optional<std::string> got = s.recv(0ms);
        EXPECT_FALSE(got) << "unexpected datagram of " << got->size() << " bytes on port " << s.port();
    }
};

TEST_P(TrafficTest, IcmpAndUdpToOtherPortsPass)
{
    Counters before = rig().counters();

    RunResult ping = rig().inTx("ping -c 3 -i 0.2 -W 10 " + rig().rxAddr());
    ASSERT_EQ(ping.status, 0) << describe(ping);
    EXPECT_TRUE(contains(ping.out, "3 packets transmitted, 3 received")) << ping.out;

    UdpSocket rx = rxSocket(7000);
    for (int i = 0; i < 5; i++) {
        std::string payload = "npf-itest-socat-" + std::to_string(i) + "-" + mode();
        ASSERT_NO_FATAL_FAILURE(rig().socatSend(payload, rx.port()));
        ASSERT_NO_FATAL_FAILURE(expectReceived(rx, payload));
    }
    UdpSocket tx = txSocket();
    const size_t sizes[] = {1, 333, 1472}; // 1472 = 1500 - IPv4 - UDP headers
    for (size_t i = 0; i < std::size(sizes); i++) {
        std::string payload = binaryPayload(sizes[i], static_cast<int>(i));
        tx.sendTo(rig().rxAddr(), rx.port(), payload);
        ASSERT_NO_FATAL_FAILURE(expectReceived(rx, payload));
    }
    expectNothingMore(rx);

    Counters after = rig().counters();
    EXPECT_TRUE(outcomesMatch(delta(after, before), {{"rx_total", 3 + 5 + 3}, {"pass_not_udp", 3}, {"pass_no_flow", 8}},
                              rig().exactCounts(), after));
}

TEST_P(TrafficTest, FlowWithoutSocketFallsBackToTheStack)
{
    RunResult add = rig().npfctl("flow add " + ifname() + " 5000");
    ASSERT_EQ(add.status, kOk) << describe(add);
    EXPECT_TRUE(contains(add.out, "added flow 0 on " + ifname() + ": port 5000")) << add.out;

    nlohmann::json flows = rig().flows();
    ASSERT_EQ(flows.size(), 1u) << flows.dump();
    EXPECT_EQ(flows[0]["id"], 0);
    EXPECT_EQ(flows[0]["port"], 5000);
    EXPECT_TRUE(flows[0]["addr"].is_null()) << flows.dump();
    EXPECT_EQ(flows[0]["family"], 0);
    EXPECT_EQ(rig().status()["flows"], 1);

    UdpSocket onFlow = rxSocket(5000);
    UdpSocket offFlow = rxSocket(5001);
    Counters before = rig().counters();
    for (int i = 0; i < 4; i++) {
        std::string payload = "npf-itest-nc-" + std::to_string(i);
        ASSERT_NO_FATAL_FAILURE(rig().ncSend(payload, 5000));
        ASSERT_NO_FATAL_FAILURE(expectReceived(onFlow, payload));
    }
    for (int i = 0; i < 2; i++) {
        std::string payload = "npf-itest-other-" + std::to_string(i);
        ASSERT_NO_FATAL_FAILURE(rig().socatSend(payload, 5001));
        ASSERT_NO_FATAL_FAILURE(expectReceived(offFlow, payload));
    }
    Counters after = rig().counters();
    EXPECT_TRUE(outcomesMatch(delta(after, before), {{"rx_total", 6}, {"pass_no_socket", 4}, {"pass_no_flow", 2}},
                              rig().exactCounts(), after));
    flows = rig().flows();
    ASSERT_EQ(flows.size(), 1u);
    EXPECT_EQ(flows[0]["posted"], 0);
    EXPECT_EQ(flows[0]["consumed"], 0);

    RunResult del = rig().npfctl("flow del " + ifname() + " 5000");
    ASSERT_EQ(del.status, kOk) << describe(del);
    EXPECT_TRUE(rig().flows().empty()) << rig().flows().dump();
    EXPECT_EQ(rig().status()["flows"], 0);

    // Port 5000 is no flow any more.
    before = after;
    ASSERT_NO_FATAL_FAILURE(rig().ncSend("npf-itest-after-del", 5000));
    ASSERT_NO_FATAL_FAILURE(expectReceived(onFlow, "npf-itest-after-del"));
    after = rig().counters();
    EXPECT_TRUE(outcomesMatch(delta(after, before), {{"rx_total", 1}, {"pass_no_flow", 1}}, rig().exactCounts(),
                              after));

    RunResult delAgain = rig().npfctl("flow del " + ifname() + " 5000");
    EXPECT_EQ(delAgain.status, kConflict) << describe(delAgain);
}

// Posts one buffer the way an application does (slot, then prod) through
// the pinned maps; with no socket bound XDP must pass without claiming it.
TEST_P(TrafficTest, PostedBufferIsNotConsumedWithoutSocket)
{
    RunResult add = rig().npfctl("flow add " + ifname() + " 5002 --addr " + rig().rxAddr());
    ASSERT_EQ(add.status, kOk) << describe(add);
    nlohmann::json flows = rig().flows();
    ASSERT_EQ(flows.size(), 1u) << flows.dump();
    EXPECT_EQ(flows[0]["addr"], rig().rxAddr());
    EXPECT_EQ(flows[0]["family"], 4);
    uint32_t fid = flows[0]["id"].get<uint32_t>();

    {
        // The flow's own post ring map: npf_rings[fid].
        std::string rings = rig().pinDir() + "/npf_rings";
        Fd ringsFd(bpf_obj_get(rings.c_str()));
        ASSERT_TRUE(ringsFd) << "bpf_obj_get " << rings << ": " << strerror(errno);
        uint32_t ringId = 0;
        ASSERT_EQ(bpf_map_lookup_elem(ringsFd.get(), &fid, &ringId), 0) << strerror(errno);
        Fd ringFd(bpf_map_get_fd_by_id(ringId));
        ASSERT_TRUE(ringFd) << strerror(errno);
        const uint32_t zero = 0;
        npf_ring ring{};
        ASSERT_EQ(bpf_map_lookup_elem(ringFd.get(), &zero, &ring), 0) << strerror(errno);
        ASSERT_EQ(ring.cursor.prod, 0u);
        ASSERT_EQ(ring.cursor.cons, 0u);
        ring.posts[0] = npf_post{.offset = 0, .len = NPF_PAGE_SIZE, .pad = 0};
        ring.cursor.prod = 1;
        ASSERT_EQ(bpf_map_update_elem(ringFd.get(), &zero, &ring, BPF_ANY), 0) << strerror(errno);
    }
    flows = rig().flows();
    EXPECT_EQ(flows[0]["posted"], 1);
    EXPECT_EQ(flows[0]["consumed"], 0);

    UdpSocket rx = rxSocket(5002);
    UdpSocket tx = txSocket();
    Counters before = rig().counters();
    for (int i = 0; i < 3; i++) {
        std::string payload = binaryPayload(100 + static_cast<size_t>(i), i);
        tx.sendTo(rig().rxAddr(), rx.port(), payload);
        ASSERT_NO_FATAL_FAILURE(expectReceived(rx, payload));
    }
    Counters after = rig().counters();
    EXPECT_TRUE(outcomesMatch(delta(after, before), {{"rx_total", 3}, {"pass_no_socket", 3}}, rig().exactCounts(),
                              after));
    flows = rig().flows();
    EXPECT_EQ(flows[0]["posted"], 1);
    EXPECT_EQ(flows[0]["consumed"], 0) << "XDP claimed a posted buffer with no socket bound";
}

// A flow with an address matches only datagrams to that address.
TEST_P(TrafficTest, FlowForAnotherAddressDoesNotMatch)
{
    RunResult add = rig().npfctl("flow add " + ifname() + " 5003 --addr 198.18.255.254");
    ASSERT_EQ(add.status, kOk) << describe(add);
    UdpSocket rx = rxSocket(5003);
    Counters before = rig().counters();
    ASSERT_NO_FATAL_FAILURE(rig().socatSend("npf-itest-addr", 5003));
    ASSERT_NO_FATAL_FAILURE(expectReceived(rx, "npf-itest-addr"));
    Counters after = rig().counters();
    EXPECT_TRUE(outcomesMatch(delta(after, before), {{"rx_total", 1}, {"pass_no_flow", 1}}, rig().exactCounts(),
                              after));
}

NPF_INSTANTIATE_MODES(TrafficTest);

} // namespace
} // namespace npf::itest
