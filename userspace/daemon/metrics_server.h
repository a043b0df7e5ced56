// The HTTP server behind `npfd --metrics` (metrics.h) and `--health`
// (health.h): one job, GET (or HEAD) of a few fixed paths, each answered
// with what a callback returns (/metrics: the scrape; /healthz, /readyz: a
// status and a line). One thread, one epoll, every socket non-blocking, so
// no peer can hold it up:
//  - each connection has a deadline for its whole request (accept to the end
//    of its headers), however slowly it trickles bytes; then one for writing
//    the response, then a short one to linger for the peer's close;
//  - at most `maxConnections` are open: a new one closes the connection
//    closest to its deadline (one already answered first) to make room;
//  - request headers are capped (431 beyond), other paths are 404, other
//    methods 405, anything that is not HTTP/1.x 400; every response says
//    `Connection: close`;
//  - accept failing for want of descriptors or memory (EMFILE, ENFILE, ...)
//    takes the listener out of epoll for `acceptBackoff` instead of spinning.
// The callbacks run on the server's thread, once per request; a scrape's
// response is gzip-compressed when the request accepts it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sys/fd.h"

namespace npf::daemon {

struct MetricsServerLimits {
    std::chrono::milliseconds requestDeadline{5000};   // accept -> end of the request's headers
    std::chrono::milliseconds responseDeadline{10000}; // request read -> response handed to the kernel
    std::chrono::milliseconds lingerDeadline{2000};    // response sent -> the peer closes (else we do)
    size_t maxConnections = 64;
    size_t maxHeaderBytes = 8192; // request line and headers
    std::chrono::milliseconds acceptBackoff{100};
};

// What the server did, for tests and logs.
struct MetricsServerStats {
    uint64_t accepted = 0;
    uint64_t scrapes = 0;      // 200 responses to a scrape route (GET or HEAD /metrics)
    uint64_t errors = 0;       // 4xx/5xx responses
    uint64_t timedOut = 0;     // closed at their deadline before they were answered
    uint64_t evicted = 0;      // closed to make room for a new connection
    uint64_t acceptPauses = 0; // listener taken out of epoll after an accept failure
};

// What a route answers: a status (200, 503, ...) and a body.
struct HttpPage {
    int status = 200;
    std::string body;
};

// One path the server answers. `page` runs on the server's thread for every
// GET or HEAD of `path` (a query string is ignored) and may throw: that
// request then gets a 500.
struct HttpRoute {
    std::string path; // "/metrics", "/healthz"
    std::function<HttpPage()> page;
    // Prometheus text: a 200 counts as a scrape (stats, OnReply), goes out
    // gzip-compressed when the request accepts it, typed version=0.0.4.
    // Otherwise text/plain, never compressed.
    bool scrape = false;
};

class MetricsServer {
public:
    // The body of one scrape (Prometheus text format). May throw: the scrape
    // then gets a 500.
    using Render = std::function<std::string()>;
    // After a scrape's response was handed to the kernel: the bytes of its
    // body as sent (compressed or not) and the time from the end of the
    // request to then. Optional.
    using OnReply = std::function<void(size_t bodyBytes, std::chrono::nanoseconds took)>;

    // Listens on `address`: "ADDR:PORT" (IPv4, or a host name: its first
    // address, IPv4 preferred), "[V6]:PORT" (IPv6 only) or "PORT" (every IPv4
    // address); port 0 lets the kernel pick (ports() says which). Throws
    // std::invalid_argument for a malformed address or no route,
    // std::system_error naming the address and the call when it cannot
    // listen there (its what() begins with listenPrefix(address)).
    MetricsServer(const std::string& address, std::vector<HttpRoute> routes, OnReply onReply = {},
                  MetricsServerLimits limits = {});
    // /metrics alone, rendered by `render`.
    MetricsServer(const std::string& address, Render render, OnReply onReply = {}, MetricsServerLimits limits = {});
    ~MetricsServer(); // stops the thread: no render runs after it returns
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    std::vector<int> ports() const { return {port_}; }
    MetricsServerStats stats() const noexcept;
    static std::string listenPrefix(const std::string& address); // "metrics: listen on ADDR: "

private:
    class Loop; // the thread's state (metrics_server.cpp)
    Fd stop_;   // eventfd: written by the destructor
    int port_ = 0;
    std::unique_ptr<Loop> loop_;
    std::thread thread_;
};

// npfd's command-line forms of an address (`flag`: "--metrics", "--health"):
// throws ArgumentError unless `address` is "ADDR:PORT", "[V6]:PORT" or
// "PORT" (port 1..65535). Checked before npfd touches any interface.
void checkListenAddress(const std::string& flag, const std::string& address);

// A server for npfd's `flag` on `address`, with npfd's errors: ArgumentError
// for a malformed address, Error naming the flag, the address and why it
// cannot listen there (the port in use, not an address of this host, ...).
std::unique_ptr<MetricsServer> serveHttp(const std::string& flag, const std::string& address,
                                         std::vector<HttpRoute> routes, MetricsServer::OnReply onReply = {});

} // namespace npf::daemon
