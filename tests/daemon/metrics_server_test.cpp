// npfd's metrics HTTP server (userspace/daemon/metrics_server.h) alone, on
// loopback, no root: GET/HEAD /metrics with the rendered body (gzip when
// accepted), 404/405/400/431; the render callback once per scrape; a
// deadline for the whole request however slowly it trickles; a connection
// cap that closes the connection closest to its deadline; a response nobody
// reads dropped at its deadline; accept backing off when out of
// descriptors; no render after the destructor. Limits are shortened here so
// deadlines pass quickly; the tests wait on events, never on time.
#include "daemon/metrics_server.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "http_client.h"
#include "wait.h"

namespace npf::daemon {
namespace {

using namespace std::chrono_literals;
using test::Clock;
using test::HttpReply;

std::string gunzip(const std::string& in)
{
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK)
        return "<inflateInit2 failed>";
    std::string out;
    char buf[65536];
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = uInt(in.size());
    int rc = Z_OK;
    while (rc == Z_OK) {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof(buf);
        rc = inflate(&zs, Z_NO_FLUSH);
        out.append(buf, sizeof(buf) - zs.avail_out);
    }
    inflateEnd(&zs);
    return rc == Z_STREAM_END ? out : "<not gzip>";
}

// A server on 127.0.0.1 (a port the kernel picks) whose body is body(),
// counting renders.
struct Served {
    explicit Served(std::string b = "# TYPE x counter\nx 1\n", MetricsServerLimits limits = {})
        : body_(std::move(b)), server(
                                   "127.0.0.1:0", [this] { return render(); }, {}, limits)
    {
    }
    uint16_t port() const { return uint16_t(server.ports().at(0)); }
    HttpReply get(const std::string& request, std::chrono::milliseconds deadline = test::kDeadline)
    {
        return test::httpExchange(port(), request, Clock::now() + deadline);
    }
    std::string body()
    {
        std::lock_guard<std::mutex> lock(mu_);
        return body_;
    }
    void setBody(std::string b)
    {
        std::lock_guard<std::mutex> lock(mu_);
        body_ = std::move(b);
    }

    std::atomic<int> renders{0};

private:
    std::string render()
    {
        renders++;
        return body();
    }
    std::mutex mu_;
    std::string body_;

public:
    MetricsServer server; // last: stops first
};

const std::string kGet = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";

TEST(MetricsServer, ServesTheBodyOncePerScrape)
{
    Served s;
    const HttpReply r = s.get(kGet);
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, s.body());
    EXPECT_EQ(r.header("Content-Length"), std::to_string(s.body().size()));
    EXPECT_EQ(r.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(r.header("Connection"), "close");
    EXPECT_EQ(r.header("Content-Encoding"), "");
    EXPECT_EQ(s.renders, 1);

    // HTTP/1.0, a query string, bare newlines: the same.
    EXPECT_EQ(s.get("GET /metrics HTTP/1.0\r\n\r\n").body, s.body());
    EXPECT_EQ(s.get("GET /metrics?name[]=x HTTP/1.1\r\nHost: h\r\n\r\n").body, s.body());
    EXPECT_EQ(s.get("GET /metrics HTTP/1.1\nHost: h\n\n").body, s.body());
    // HEAD: the headers of a GET, no body.
    const HttpReply head = s.get("HEAD /metrics HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(head.status, 200) << head.error;
    EXPECT_EQ(head.body, "");
    EXPECT_EQ(head.header("Content-Length"), std::to_string(s.body().size()));
    EXPECT_EQ(s.renders, 5);
    EXPECT_EQ(s.server.stats().scrapes, 5u);
}

TEST(MetricsServer, GzipWhenTheRequestAcceptsIt)
{
    Served s(std::string(20000, 'n') + "\n");
    const HttpReply r = s.get("GET /metrics HTTP/1.1\r\nHost: h\r\naccept-encoding: deflate, gzip\r\n\r\n");
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.header("Content-Encoding"), "gzip");
    EXPECT_EQ(r.header("Content-Length"), std::to_string(r.body.size()));
    EXPECT_LT(r.body.size(), s.body().size());
    EXPECT_EQ(gunzip(r.body), s.body());
    // q=0 refuses it.
    const HttpReply plain = s.get("GET /metrics HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip;q=0\r\n\r\n");
    EXPECT_EQ(plain.header("Content-Encoding"), "");
    EXPECT_EQ(plain.body, s.body());
}

TEST(MetricsServer, OtherPathsMethodsAndGarbageGetTheirStatus)
{
    Served s;
    EXPECT_EQ(s.get("GET / HTTP/1.1\r\n\r\n").status, 404);
    EXPECT_EQ(s.get("GET /metrics/x HTTP/1.1\r\n\r\n").status, 404);
    const HttpReply post = s.get("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
    EXPECT_EQ(post.status, 405) << post.error;
    EXPECT_EQ(post.header("Allow"), "GET, HEAD");
    EXPECT_EQ(s.get("hello\r\n\r\n").status, 400);
    EXPECT_EQ(s.get("GET /metrics HTTP/2.0\r\n\r\n").status, 400);
    EXPECT_EQ(s.get("GET /metrics\r\n\r\n").status, 400);
    EXPECT_EQ(s.renders, 0) << "only a scrape renders";
    EXPECT_EQ(s.get(kGet).status, 200);
}

TEST(MetricsServer, HeadersOverTheCapGet431)
{
    MetricsServerLimits l;
    l.maxHeaderBytes = 8192;
    Served s("x 1\n", l);
    // Just under the cap: served.
    const std::string fits = "GET /metrics HTTP/1.1\r\nX: ";
    const std::string end = "\r\n\r\n";
    EXPECT_EQ(s.get(fits + std::string(8192 - fits.size() - end.size(), 'a') + end).status, 200);
    // One byte over, and far over (the peer still sending when it is answered).
    for (size_t size : {size_t(8193), size_t(1) << 20}) {
        const HttpReply r = s.get(fits + std::string(size - fits.size() - end.size(), 'a') + end);
        EXPECT_EQ(r.status, 431) << size << ": " << r.error;
    }
    EXPECT_EQ(s.renders, 1);
}

// The deadline covers the whole request: a connection that says nothing and
// one that trickles a byte at a time are both closed at it.
TEST(MetricsServer, ARequestHasOneDeadlineHoweverSlowlyItArrives)
{
    MetricsServerLimits l;
    l.requestDeadline = 300ms;
    Served s("x 1\n", l);
    const auto end = Clock::now() + test::kDeadline;
    const Fd silent = test::connectLoopback(s.port(), end);
    const Fd trickler = test::connectLoopback(s.port(), end);
    ASSERT_TRUE(silent && trickler);
    ASSERT_EQ(::send(trickler.get(), "GET /m", 6, MSG_NOSIGNAL), 6);
    // One byte every 20 ms, each well within any per-read timeout, until it
    // is closed.
    bool trickleClosed = false;
    while (!trickleClosed && Clock::now() < end) {
        if (::send(trickler.get(), "e", 1, MSG_NOSIGNAL) != 1) {
            trickleClosed = true;
            break;
        }
        if (test::waitFor(trickler.get(), POLLIN, Clock::now() + 20ms)) {
            char c;
            const ssize_t n = ::recv(trickler.get(), &c, 1, MSG_DONTWAIT);
            trickleClosed = n == 0 || (n < 0 && errno != EAGAIN);
        }
    }
    EXPECT_TRUE(trickleClosed);
    bool closed = false;
    EXPECT_EQ(test::readUntilClose(silent.get(), end, &closed), "");
    EXPECT_TRUE(closed);
    EXPECT_EQ(s.server.stats().timedOut, 2u);
    EXPECT_EQ(s.renders, 0);
}

// Full: each new connection closes the one closest to its deadline (the
// oldest), so the newest is always served.
TEST(MetricsServer, AtTheCapTheOldestConnectionMakesRoom)
{
    MetricsServerLimits l;
    l.maxConnections = 4;
    l.requestDeadline = std::chrono::duration_cast<std::chrono::milliseconds>(test::kDeadline); // not what closes them
    Served s("x 1\n", l);
    const auto end = Clock::now() + test::kDeadline;
    std::vector<Fd> idle;
    for (int i = 0; i < 4; i++) {
        idle.push_back(test::connectLoopback(s.port(), end));
        ASSERT_TRUE(idle.back());
        ASSERT_TRUE(test::waitUntil([&] { return s.server.stats().accepted == uint64_t(i + 1); }));
    }
    EXPECT_EQ(s.get(kGet).status, 200);
    bool closed = false;
    test::readUntilClose(idle[0].get(), end, &closed);
    EXPECT_TRUE(closed) << "the oldest was not closed";
    EXPECT_EQ(s.server.stats().evicted, 1u);
    EXPECT_EQ(s.server.stats().timedOut, 0u);
    for (size_t i = 1; i < idle.size(); i++) {
        char c;
        EXPECT_EQ(::recv(idle[i].get(), &c, 1, MSG_DONTWAIT), -1) << i << " closed too";
    }
}

// Slowloris: 256 connections that each sent part of a request line and then
// a byte now and then. A scrape still gets its body; every one of them is
// closed (at the cap or at its deadline).
TEST(MetricsServer, SlowlorisDoesNotStarveAScrape)
{
    MetricsServerLimits l;
    l.requestDeadline = 2s;
    Served s(std::string(100000, 'm') + "\n", l);
    const auto end = Clock::now() + test::kDeadline;
    constexpr size_t kSlow = 256;
    std::vector<Fd> slow;
    for (size_t i = 0; i < kSlow; i++) {
        slow.push_back(test::connectLoopback(s.port(), end));
        ASSERT_TRUE(slow.back()) << i;
        (void)::send(slow.back().get(), "GET /metr", 9, MSG_NOSIGNAL);
    }
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    std::thread trickle([&] {
        std::unique_lock<std::mutex> lock(mu);
        while (!cv.wait_for(lock, 100ms, [&] { return stop; }))
            for (const Fd& fd : slow)
                (void)::send(fd.get(), "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    });
    const HttpReply r = s.get(kGet);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, s.body());
    size_t closed = 0;
    for (const Fd& fd : slow) {
        bool c = false;
        test::readUntilClose(fd.get(), end, &c);
        closed += c;
    }
    {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
    }
    cv.notify_all();
    trickle.join();
    EXPECT_EQ(closed, kSlow);
    const MetricsServerStats st = s.server.stats();
    EXPECT_EQ(st.evicted + st.timedOut, kSlow);
    EXPECT_EQ(s.renders, 1);
}

// A scrape whose reader never reads: its response cannot all be written, and
// it is closed at the response deadline while others are served.
TEST(MetricsServer, AResponseNobodyReadsIsDroppedAtItsDeadline)
{
    MetricsServerLimits l;
    l.responseDeadline = 300ms;
    Served s(std::string(32 << 20, 'b'), l); // more than the socket buffers hold
    const auto end = Clock::now() + test::kDeadline;
    const Fd stuck = test::connectLoopback(s.port(), end);
    ASSERT_TRUE(stuck);
    const int small = 4096;
    ASSERT_EQ(::setsockopt(stuck.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    ASSERT_TRUE(test::sendAll(stuck.get(), kGet, end));
    ASSERT_TRUE(test::waitUntil([&] { return s.server.stats().timedOut == 1; }));
    EXPECT_EQ(s.renders, 1);
    s.setBody("small\n");
    const HttpReply r = s.get(kGet);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, "small\n");
}

// Out of descriptors: accept fails with EMFILE, the listener is left alone
// for a while instead of being retried at once, and serving resumes once
// descriptors are free (the connection that waited in the backlog too).
TEST(MetricsServer, AcceptBacksOffWhenOutOfDescriptors)
{
    MetricsServerLimits l;
    l.requestDeadline = std::chrono::duration_cast<std::chrono::milliseconds>(test::kDeadline);
    Served s("x 1\n", l);
    const auto end = Clock::now() + test::kDeadline;
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
    Fd waiting;
    {
        struct Restore {
            rlimit r;
            ~Restore() { ::setrlimit(RLIMIT_NOFILE, &r); }
        } restore{old};
        const int lowest = ::dup(0);
        ASSERT_GE(lowest, 0);
        ::close(lowest);
        rlimit tight = old;
        tight.rlim_cur = rlim_t(lowest) + 32;
        ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
        // A few connections the server accepts, then every descriptor left
        // taken, then one freed for a connection the server cannot accept.
        std::vector<Fd> held;
        for (int i = 0; i < 4; i++) {
            held.push_back(test::connectLoopback(s.port(), end));
            ASSERT_TRUE(held.back());
            ASSERT_TRUE(test::waitUntil([&] { return s.server.stats().accepted == uint64_t(i + 1); }));
        }
        std::vector<Fd> filler;
        for (Fd fd; (fd = Fd(::dup(0)));)
            filler.push_back(std::move(fd));
        ASSERT_EQ(errno, EMFILE);
        ASSERT_FALSE(filler.empty());
        filler.pop_back();
        waiting = test::connectLoopback(s.port(), end);
        ASSERT_TRUE(waiting);
        ASSERT_TRUE(test::waitUntil([&] { return s.server.stats().acceptPauses >= 1; }))
            << "accepted " << s.server.stats().accepted;
        EXPECT_EQ(s.server.stats().accepted, 4u);
    }
    // Descriptors again (the filler closed, the limit restored): the one
    // that waited is accepted and served, and so is a new one.
    const HttpReply r = test::httpExchange(waiting.get(), kGet, end);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(s.get(kGet).status, 200);
}

TEST(MetricsServer, NoScrapeAfterTheDestructor)
{
    auto s = std::make_unique<Served>();
    const uint16_t port = s->port();
    EXPECT_EQ(s->get(kGet).status, 200);
    const Fd pending = test::connectLoopback(port, Clock::now() + test::kDeadline);
    ASSERT_TRUE(pending);
    s.reset();
    // The listener is gone: its pending connection is reset, a new one refused.
    bool closed = false;
    test::sendAll(pending.get(), kGet, Clock::now() + test::kDeadline);
    test::readUntilClose(pending.get(), Clock::now() + test::kDeadline, &closed);
    EXPECT_TRUE(closed);
    EXPECT_FALSE(test::connectLoopback(port, Clock::now() + test::kDeadline));
}

TEST(MetricsServer, AddressForms)
{
    auto serves = [](const std::string& address) {
        MetricsServer m(address, [] { return std::string("x 1\n"); });
        return test::httpExchange(uint16_t(m.ports().at(0)), kGet, Clock::now() + test::kDeadline).status;
    };
    EXPECT_EQ(serves("127.0.0.1:0"), 200);
    EXPECT_EQ(serves("0"), 200);           // every IPv4 address
    EXPECT_EQ(serves("localhost:0"), 200); // a name: its IPv4 address first
    for (const char* bad : {"::1:0", "127.0.0.1:", "127.0.0.1:99999", "[::1:0", "[zz]:0", "x"})
        EXPECT_THROW(MetricsServer(bad, [] { return std::string(); }), std::invalid_argument) << bad;

    // A port in use: a std::system_error naming the address and the call.
    MetricsServer first("127.0.0.1:0", [] { return std::string(); });
    const std::string taken = "127.0.0.1:" + std::to_string(first.ports().at(0));
    try {
        MetricsServer second(taken, [] { return std::string(); });
        ADD_FAILURE() << "listened twice on " << taken;
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EADDRINUSE);
        EXPECT_NE(std::string(e.what()).find(taken), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("bind"), std::string::npos) << e.what();
    }
}

} // namespace
} // namespace npf::daemon
