// A small HTTP/1.x client for the tests of npfd's metrics endpoint
// (metrics_server_test.cpp, npfd_metrics_test.cpp): non-blocking sockets,
// every wait bounded by a deadline, so a server that never answers fails
// the test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sys/fd.h"

namespace npf::test {

using Clock = std::chrono::steady_clock;

// Milliseconds left until `end` (0 when past it), for poll().
inline int msUntil(Clock::time_point end)
{
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    return left.count() > 0 ? int(left.count()) : 0;
}

// Waits for `events` on fd until `end`; false on the deadline.
inline bool waitFor(int fd, short events, Clock::time_point end)
{
    pollfd p{fd, events, 0};
    for (;;) {
        const int n = ::poll(&p, 1, msUntil(end));
        if (n > 0)
            return true;
        if (n == 0 || errno != EINTR)
            return false;
    }
}

// A non-blocking TCP connection to 127.0.0.1:port (in the caller's network
// namespace), established before `end`; else an empty Fd.
inline Fd connectLoopback(uint16_t port, Clock::time_point end)
{
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!fd)
        return {};
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (errno != EINPROGRESS || !waitFor(fd.get(), POLLOUT, end) ||
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
            return {};
    }
    return fd;
}

// Sends all of `data` before `end`; false if the peer reset or the deadline
// passed. A peer that answered and closed before reading everything is not
// a failure of the caller's: *reset says so.
inline bool sendAll(int fd, const std::string& data, Clock::time_point end, bool* reset = nullptr)
{
    for (size_t sent = 0; sent < data.size();) {
        const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n > 0)
            sent += size_t(n);
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && errno == EAGAIN && waitFor(fd, POLLOUT, end))
            continue;
        else {
            if (reset)
                *reset = n < 0 && (errno == EPIPE || errno == ECONNRESET);
            return false;
        }
    }
    return true;
}

// Everything the peer sends until it closes, before `end`. *closed: it
// closed (EOF or reset) rather than the deadline passing.
inline std::string readUntilClose(int fd, Clock::time_point end, bool* closed = nullptr)
{
    std::string out;
    char buf[65536];
    if (closed)
        *closed = false;
    for (;;) {
        const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            out.append(buf, size_t(n));
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            if (closed)
                *closed = true;
            return out;
        } else if (errno == EAGAIN && !waitFor(fd, POLLIN, end)) {
            return out;
        }
    }
}

struct HttpReply {
    int status = 0;   // 0: no complete reply before the deadline
    std::string head; // status line and headers
    std::string body;
    std::string error; // why there is no reply

    // A header's value ("" if absent); the name is matched case-insensitively.
    std::string header(const std::string& name) const
    {
        size_t at = head.find("\r\n");
        while (at != std::string::npos && at + 2 < head.size()) {
            const size_t next = head.find("\r\n", at + 2);
            const std::string line = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
            const size_t colon = line.find(':');
            if (colon == name.size() && ::strncasecmp(line.c_str(), name.c_str(), name.size()) == 0) {
                size_t v = colon + 1;
                while (v < line.size() && line[v] == ' ')
                    v++;
                return line.substr(v);
            }
            at = next;
        }
        return "";
    }
};

// Sends `request` on `fd` and reads the reply until the server closes the
// connection, before `end`.
inline HttpReply httpExchange(int fd, const std::string& request, Clock::time_point end)
{
    HttpReply r;
    bool reset = false;
    if (!sendAll(fd, request, end, &reset) && !reset) { // reset: it answered early; read what it said
        r.error = std::string("send: ") + std::strerror(errno);
        return r;
    }
    bool closed = false;
    const std::string resp = readUntilClose(fd, end, &closed);
    if (!closed) {
        r.error = "no end of reply before the deadline (" + std::to_string(resp.size()) + " bytes)";
        return r;
    }
    const size_t head = resp.find("\r\n\r\n");
    if (resp.rfind("HTTP/1.", 0) != 0 || head == std::string::npos) {
        r.error = "not an HTTP reply: " + resp.substr(0, 200);
        return r;
    }
    r.head = resp.substr(0, head);
    r.body = resp.substr(head + 4);
    r.status = std::atoi(resp.c_str() + resp.find(' ') + 1);
    return r;
}

inline HttpReply httpExchange(uint16_t port, const std::string& request, Clock::time_point end)
{
    const Fd fd = connectLoopback(port, end);
    if (!fd) {
        HttpReply r;
        r.error = "cannot connect to 127.0.0.1:" + std::to_string(port);
        return r;
    }
    return httpExchange(fd.get(), request, end);
}

} // namespace npf::test
