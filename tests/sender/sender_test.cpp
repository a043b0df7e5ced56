// npf::Sender (npf/sender.h) against a fake receiver on loopback: it sends
// its initial window and no more until a credit comes; it honours credits of
// its flow from its destination's address and ignores everything else
// (another address, another port, bad magic, short datagrams, absurd
// grants); plain mode honours nothing. CreditWindow's arithmetic alone; the
// C API's sender.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "npf/npf.h"
#include "npf/sender.h"
#include "sender/credit_window.h"
#include "sys/fd.h"

namespace npf {
namespace {

TEST(CreditWindow, InitialWindowThenTheGrant)
{
    CreditWindow w(4);
    EXPECT_EQ(w.room(0), 4u);
    EXPECT_EQ(w.room(4), 0u);
    EXPECT_TRUE(w.take(7, 2, 10, 4)); // first credit: our datagram 0 is its 0
    EXPECT_EQ(w.room(4), 6u);
    EXPECT_FALSE(w.take(7, 3, 9, 5)) << "an older grant of the same epoch";
    EXPECT_EQ(w.room(5), 5u);
    EXPECT_TRUE(w.take(7, 6, 20, 8));
    EXPECT_EQ(w.room(8), 12u);
}

TEST(CreditWindow, ANewEpochCountsFromWhatTheReceiverSaw)
{
    CreditWindow w(8);
    EXPECT_TRUE(w.take(1, 8, 16, 8));
    EXPECT_EQ(w.room(10), 6u);
    // The receiver began anew (another sender in between): it has seen 3 of
    // ours since, grants 5 from there.
    EXPECT_TRUE(w.take(2, 3, 5, 10));
    EXPECT_EQ(w.rebased(), 1u);
    EXPECT_EQ(w.room(10), 2u);
}

TEST(CreditWindow, WritesOffWhatTheReceiverNeverSaw)
{
    CreditWindow w(4);
    EXPECT_TRUE(w.take(1, 0, 4, 0));
    EXPECT_EQ(w.room(4), 0u);
    EXPECT_EQ(w.writeOff(4), 4u); // none of the four arrived
    EXPECT_EQ(w.room(4), 4u);
    EXPECT_EQ(w.writeOff(4), 0u);
}

// A UDP socket on 127.0.0.1 standing in for the receiver, and a helper to
// send credits to the sender from any local address.
struct FakeReceiver {
    Fd sock;
    uint16_t port = 0;
    FakeReceiver()
    {
        sock.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(::bind(sock.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        socklen_t len = sizeof a;
        ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.sin_port);
        timeval tv{2, 0};
        ::setsockopt(sock.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    // Drains what arrived; returns how many datagrams.
    size_t drain()
    {
        size_t n = 0;
        char buf[2048];
        while (::recv(sock.get(), buf, sizeof buf, MSG_DONTWAIT) >= 0)
            n++;
        return n;
    }
    // The sender's address: from the first datagram waiting.
    sockaddr_in senderAddr()
    {
        char buf[2048];
        sockaddr_in from{};
        socklen_t len = sizeof from;
        EXPECT_GE(::recvfrom(sock.get(), buf, sizeof buf, MSG_PEEK, reinterpret_cast<sockaddr*>(&from), &len), 0);
        return from;
    }
    static void sendFrom(const char* src, const sockaddr_in& to, const void* msg, size_t len)
    {
        Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        ASSERT_EQ(inet_pton(AF_INET, src, &a.sin_addr), 1);
        ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        ASSERT_EQ(::sendto(s.get(), msg, len, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to), ssize_t(len));
    }
};

npf_credit credit(uint16_t port, uint32_t epoch, uint64_t received, uint64_t limit)
{
    npf_credit m{};
    m.magic = htonl(NPF_CREDIT_MAGIC);
    m.version = NPF_CREDIT_VERSION;
    m.port = htons(port);
    m.epoch = htonl(epoch);
    m.received = htobe64(received);
    m.limit = htobe64(limit);
    return m;
}

std::vector<std::span<const uint8_t>> datagrams(const std::vector<uint8_t>& payload, size_t n)
{
    return std::vector<std::span<const uint8_t>>(n, std::span<const uint8_t>(payload));
}

TEST(Sender, SendsItsWindowAndWaitsForCreditOfItsFlowOnly)
{
    FakeReceiver rx;
    Sender tx({.to = "127.0.0.1", .port = rx.port, .initialWindow = 4, .timeout = std::chrono::milliseconds(150)});
    const std::vector<uint8_t> payload(100, 1);
    EXPECT_EQ(tx.send(datagrams(payload, 10)), 4) << "the initial window, then the timeout";
    EXPECT_EQ(tx.send(datagrams(payload, 6)), -ETIMEDOUT);
    const sockaddr_in to = rx.senderAddr();
    EXPECT_EQ(rx.drain(), 4u);

    // Hostile or stray datagrams: none of them is a credit.
    const npf_credit good = credit(rx.port, 1, 4, 10);
    npf_credit badMagic = good, badPort = credit(uint16_t(rx.port + 1), 1, 4, 10), absurd = credit(rx.port, 1, 1 << 30, 10);
    badMagic.magic = 0;
    FakeReceiver::sendFrom("127.0.0.2", to, &good, sizeof good); // not the destination's address
    FakeReceiver::sendFrom("127.0.0.1", to, &badMagic, sizeof badMagic);
    FakeReceiver::sendFrom("127.0.0.1", to, &badPort, sizeof badPort);
    FakeReceiver::sendFrom("127.0.0.1", to, &absurd, sizeof absurd);
    FakeReceiver::sendFrom("127.0.0.1", to, &good, sizeof good - 1);
    EXPECT_EQ(tx.send(datagrams(payload, 6)), -ETIMEDOUT);
    EXPECT_EQ(tx.stats().ignored, 5u);
    EXPECT_EQ(tx.stats().credits, 0u);

    // The real one: 6 more.
    FakeReceiver::sendFrom("127.0.0.1", to, &good, sizeof good);
    EXPECT_EQ(tx.send(datagrams(payload, 8)), 6);
    EXPECT_EQ(rx.drain(), 6u);
    const SenderStats s = tx.stats();
    EXPECT_EQ(s.sent, 10u);
    EXPECT_EQ(s.credits, 1u);
    EXPECT_EQ(s.limit, 10u);
    EXPECT_GE(s.throttled, 1u);
}

TEST(Sender, PlainModeHonoursNothing)
{
    FakeReceiver rx;
    Sender tx({.to = "127.0.0.1", .port = rx.port, .credits = false});
    const std::vector<uint8_t> payload(64, 2);
    EXPECT_EQ(tx.send(datagrams(payload, 100)), 100);
    EXPECT_EQ(tx.stats().throttled, 0u);
}

TEST(Sender, RefusesBadConfigurations)
{
    EXPECT_THROW(Sender({.to = "not-an-address", .port = 9}), std::invalid_argument);
    EXPECT_THROW(Sender({.to = "127.0.0.1", .port = 0}), std::invalid_argument);
    EXPECT_THROW(Sender({.to = "127.0.0.1", .port = 9, .initialWindow = 0}), std::invalid_argument);
    EXPECT_THROW(Sender({.to = "127.0.0.1", .port = 9, .from = "::1"}), std::invalid_argument);
    EXPECT_THROW(Sender({.to = "127.0.0.1", .port = 9, .rate = -1}), std::invalid_argument);
}

TEST(SenderCApi, OpensSendsCountsAndRefusesBadOptions)
{
    npf_sender* s = nullptr;
    NPF_OPTS(npf_sender_opts, bad, .to = nullptr, .port = 9);
    EXPECT_EQ(npf_sender_open(&bad, &s), -EINVAL);
    NPF_OPTS(npf_sender_opts, badPlain, .to = "127.0.0.1", .port = 9, .plain = 2);
    EXPECT_EQ(npf_sender_open(&badPlain, &s), -EINVAL);
    NPF_OPTS(npf_sender_opts, noPort, .to = "127.0.0.1", .port = 0);
    EXPECT_EQ(npf_sender_open(&noPort, &s), -EINVAL);
    EXPECT_EQ(s, nullptr);

    FakeReceiver rx;
    NPF_OPTS(npf_sender_opts, o, .to = "127.0.0.1", .port = rx.port, .plain = 1);
    ASSERT_EQ(npf_sender_open(&o, &s), 0) << npf_strerror_last();
    char buf[32] = {};
    iovec iov[3] = {{buf, 10}, {buf, 20}, {buf, 30}};
    EXPECT_EQ(npf_sender_send(s, iov, 3), 3);
    EXPECT_EQ(npf_sender_send(s, nullptr, 1), -EINVAL);
    EXPECT_GE(npf_sender_fd(s), 0);
    npf_sender_counters c{.sz = sizeof c};
    ASSERT_EQ(npf_sender_read_counters(s, &c), 0);
    EXPECT_EQ(c.sent, 3u);
    npf_sender_close(s);
    EXPECT_EQ(rx.drain(), 3u);
}

} // namespace
} // namespace npf
