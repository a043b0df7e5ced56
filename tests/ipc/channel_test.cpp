// The client's Channel against a scripted daemon on the other end of a
// socketpair: typed calls with descriptors both ways, error replies, stale
// replies after a timeout, the daemon going away.
#include "ipc/channel.h"
#include "ipc_test_util.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <future>
#include <thread>

namespace npf::test {
namespace {

using namespace npf::ipc;

// The daemon's side: blocking receive of the next request.
struct Served {
    Message message;
    std::vector<Fd> fds;
};

Served nextRequest(int fd)
{
    RecvResult r = recvMessage(fd);
    if (r.status != IoStatus::Ok)
        throw std::runtime_error("fake daemon: no request");
    return {parse(r.message.bytes), std::move(r.message.fds)};
}

void reply(int fd, const std::string& bytes, std::span<const int> fds = {})
{
    if (sendMessage(fd, bytes, fds) != IoStatus::Ok)
        throw std::runtime_error("fake daemon: send failed");
}

struct Rig {
    Rig()
    {
        Fd client;
        socketPair(client, daemon);
        channel.emplace(std::move(client));
    }
    Fd daemon;
    std::optional<Channel> channel;
};

TEST(Channel, TypedCallsWithDescriptorsBothWays)
{
    Rig rig;
    std::thread daemon([&] {
        Served hello = nextRequest(rig.daemon.get());
        HelloRequest h = HelloRequest::decode(hello.message);
        HelloReply hr = helloReplyFor(negotiate(h));
        hr.daemonPid = static_cast<uint32_t>(::getpid());
        hr.ifaces = {"eth0"};
        hr.limits = {1 << 30, 1 << 28, 8};
        reply(rig.daemon.get(), hr.encode(hello.message.id));

        Served region = nextRequest(rig.daemon.get());
        RegionRequest rr = RegionRequest::decode(region.message);
        const bool fdsOk = region.fds.size() == RegionRequest::kFds && isMemfd(region.fds[0].get()) &&
                           isUserfaultfd(region.fds[1].get()) && fdSize(region.fds[0].get()) == rr.size;
        reply(rig.daemon.get(), fdsOk ? RegionReply{1}.encode(region.message.id)
                                      : ErrorReply{ErrorCode::BadFd, EBADF, "bad"}.encode(region.message.id));

        Served open = nextRequest(rig.daemon.get());
        OpenFlowRequest o = OpenFlowRequest::decode(open.message);
        Fd ring = makeMemfd("post-ring", 4096), comp = makeMemfd("completions", 8192), efd = makeEventfd();
        const std::array<int, 3> fds = {ring.get(), comp.get(), efd.get()};
        reply(rig.daemon.get(),
              OpenFlowReply{.flow = 0, .gen = 3, .port = o.port, .completionEntries = 8192}.encode(open.message.id),
              fds);
    });

    auto hello = rig.channel->call(HelloRequest{.name = "channel-test"});
    EXPECT_EQ(hello.reply.ifaces, std::vector<std::string>{"eth0"});
    EXPECT_EQ(hello.reply.daemonPid, static_cast<uint32_t>(::getpid()));
    EXPECT_EQ(hello.reply.limits.flows, 8u);
    EXPECT_EQ(rig.channel->lastId(), 1u);

    Fd memfd = makeMemfd("region", 1 << 20);
    Fd uffd = makeUserfaultfd();
    ASSERT_TRUE(uffd);
    const std::array<int, 2> regionFds = {memfd.get(), uffd.get()};
    auto region = rig.channel->call(RegionRequest{1 << 20, 1 << 16, 1 << 30, 4096}, regionFds);
    EXPECT_EQ(region.reply.region, 1u);
    EXPECT_TRUE(region.fds.empty());

    auto flow = rig.channel->call(OpenFlowRequest{.port = 9000});
    EXPECT_EQ(flow.reply.port, 9000);
    EXPECT_EQ(flow.reply.gen, 3u);
    ASSERT_EQ(flow.fds.size(), 3u);
    EXPECT_TRUE(isMemfd(flow.fds[0].get()));
    EXPECT_EQ(fdSize(flow.fds[1].get()), 8192u);
    EXPECT_TRUE(isEventfd(flow.fds[2].get()));
    EXPECT_EQ(rig.channel->lastId(), 3u);
    daemon.join();
}

TEST(Channel, ErrorReplyThrowsRemoteError)
{
    Rig rig;
    std::thread daemon([&] {
        Served r = nextRequest(rig.daemon.get());
        reply(rig.daemon.get(),
              ErrorReply{ErrorCode::NotAllowed, EACCES, "uid 1000 may not open port 22"}.encode(r.message.id));
        nextRequest(rig.daemon.get()); // say npfd could not read its id: it replies with id 0
        reply(rig.daemon.get(), ErrorReply{ErrorCode::BadMessage, EBADMSG, "message is not JSON"}.encode(0));
    });
    try {
        rig.channel->call(OpenFlowRequest{.port = 22});
        ADD_FAILURE() << "no RemoteError";
    } catch (const RemoteError& e) {
        EXPECT_EQ(e.code(), ErrorCode::NotAllowed);
        EXPECT_EQ(e.err(), EACCES);
        EXPECT_EQ(e.message(), "uid 1000 may not open port 22");
        EXPECT_STREQ(e.what(), "npfd refused open_flow: not_allowed: uid 1000 may not open port 22");
    }
    try {
        rig.channel->request({{"type", "stats"}});
        ADD_FAILURE() << "no RemoteError";
    } catch (const RemoteError& e) {
        EXPECT_EQ(e.code(), ErrorCode::BadMessage);
    }
    daemon.join();
}

TEST(Channel, WrongDescriptorCountIsBadFd)
{
    Rig rig;
    std::thread daemon([&] {
        Served r = nextRequest(rig.daemon.get());
        Fd only = makeEventfd();
        const int fds[] = {only.get()};
        reply(rig.daemon.get(), OpenFlowReply{.flow = 1, .port = 9000, .completionEntries = 8192}.encode(r.message.id),
              fds);
    });
    const int before = openFds();
    try {
        rig.channel->call(OpenFlowRequest{.port = 9000});
        ADD_FAILURE() << "no ProtocolError";
    } catch (const ProtocolError& e) {
        EXPECT_EQ(e.code(), ErrorCode::BadFd);
    }
    daemon.join();
    EXPECT_EQ(openFds(), before); // the one descriptor that came was closed
}

TEST(Channel, TimeoutThenTheLateReplyIsSkipped)
{
    Rig rig;
    std::promise<void> timedOut;
    std::thread daemon([&] {
        Served first = nextRequest(rig.daemon.get());
        timedOut.get_future().wait();
        // Late: the client gave up on it. Then the reply it waits for now.
        reply(rig.daemon.get(), PagesReply{111}.encode(first.message.id));
        Served second = nextRequest(rig.daemon.get());
        reply(rig.daemon.get(), PagesReply{222}.encode(second.message.id));
    });
    int err = 0;
    try {
        rig.channel->call(PopulateRequest{0, 4096}, {}, std::chrono::milliseconds(50));
    } catch (const std::system_error& e) {
        err = e.code().value();
        EXPECT_NE(std::string(e.what()).find("did not reply to 'populate' within 50 ms"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(err, ETIMEDOUT);
    timedOut.set_value();
    EXPECT_EQ(rig.channel->call(PopulateRequest{0, 8192}).reply.pages, 222u);
    daemon.join();
}

TEST(Channel, DaemonGoneIsAClearError)
{
    Rig rig;
    std::thread daemon([&] {
        nextRequest(rig.daemon.get());
        rig.daemon.reset();
    });
    int err = 0;
    try {
        rig.channel->call(StatsRequest{});
    } catch (const std::system_error& e) {
        err = e.code().value();
        EXPECT_NE(std::string(e.what()).find("npfd closed the connection"), std::string::npos) << e.what();
    }
    EXPECT_EQ(err, ECONNRESET);
    daemon.join();
    // Sending on a connection whose daemon is gone says the same.
    err = 0;
    try {
        rig.channel->call(ByeRequest{});
    } catch (const std::system_error& e) {
        err = e.code().value();
    }
    EXPECT_EQ(err, ECONNRESET);
}

TEST(Channel, MalformedReplyIsAProtocolError)
{
    Rig rig;
    std::thread daemon([&] {
        Served r = nextRequest(rig.daemon.get());
        reply(rig.daemon.get(), R"({"type":"ok","id":)" + std::to_string(r.message.id) + R"(,"pages":-1})");
        Served r2 = nextRequest(rig.daemon.get());
        reply(rig.daemon.get(), R"({"type":"surprise","id":)" + std::to_string(r2.message.id) + "}");
    });
    EXPECT_THROW(rig.channel->call(ReleaseRequest{0, 4096}), ProtocolError);
    EXPECT_THROW(rig.channel->call(ReleaseRequest{0, 4096}), ProtocolError);
    daemon.join();
}

TEST(Channel, RawRequestSetsTheId)
{
    Rig rig;
    std::thread daemon([&] {
        Served r = nextRequest(rig.daemon.get());
        StatsReply s;
        s.stats = {{"echo", r.message.body}};
        reply(rig.daemon.get(), s.encode(r.message.id));
    });
    Channel::Reply r = rig.channel->request({{"type", "stats"}, {"id", 999}, {"x", 1}});
    StatsReply s = StatsReply::decode(r.message);
    EXPECT_EQ(s.stats["echo"].dump(), R"({"type":"stats","id":1,"x":1})");
    EXPECT_THROW(rig.channel->request({{"no_type", 1}}), std::invalid_argument);
    daemon.join();
}

} // namespace
} // namespace npf::test
