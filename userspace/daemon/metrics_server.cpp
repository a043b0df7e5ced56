#include "daemon/metrics_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>

#include "sys/clock.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf::daemon {
namespace {

constexpr uint64_t kStopId = 0;     // epoll data of the stop eventfd
constexpr uint64_t kListenerId = 1; // of the listener; connections count up from 2
constexpr int kAcceptBatch = 16;    // accepts per wakeup, so ready connections are served in between
constexpr const char* kScrapeType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kTextType = "text/plain; charset=utf-8";

uint64_t toNs(std::chrono::milliseconds ms) { return uint64_t(ms.count()) * 1000000ull; }

// ---- the listening socket ------------------------------------------------------------

std::string listenPrefix(const std::string& address) { return MetricsServer::listenPrefix(address); }

struct ListenAddress {
    sockaddr_storage addr{};
    socklen_t len = 0;
};

ListenAddress parseListenAddress(const std::string& a)
{
    const size_t colon = a.rfind(':');
    std::string host = colon == std::string::npos ? "" : a.substr(0, colon);
    const std::string port = colon == std::string::npos ? a : a.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(port) > 65535)
        throw std::invalid_argument("metrics " + a + ": expected ADDR:PORT, [V6]:PORT or PORT");
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    if (host.empty()) {
        if (colon != std::string::npos)
            throw std::invalid_argument("metrics " + a + ": no address before the port");
        hints.ai_family = AF_INET; // "PORT": every IPv4 address
    } else if (host.front() == '[') {
        if (host.size() < 3 || host.back() != ']')
            throw std::invalid_argument("metrics " + a + ": expected [V6]:PORT");
        host = host.substr(1, host.size() - 2);
        hints.ai_family = AF_INET6;
        hints.ai_flags |= AI_NUMERICHOST;
    } else {
        if (host.find(':') != std::string::npos)
            throw std::invalid_argument("metrics " + a + ": an IPv6 address goes in brackets ([::1]:PORT)");
        hints.ai_family = AF_UNSPEC;
    }
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
    if (rc == EAI_SYSTEM || rc == EAI_AGAIN || rc == EAI_MEMORY) { // not the address's fault
        const int err = rc == EAI_SYSTEM ? errno : rc == EAI_AGAIN ? EAGAIN : ENOMEM;
        throwErrno(err, listenPrefix(a) + "cannot resolve " + host);
    }
    if (rc != 0)
        throw std::invalid_argument("metrics " + a + ": " + host + " is not an address" +
                                    (hints.ai_family == AF_INET6 ? " (IPv6 in brackets)" : "") + ": " +
                                    ::gai_strerror(rc));
    const addrinfo* pick = res;
    for (const addrinfo* r = res; r; r = r->ai_next)
        if (r->ai_family == AF_INET) {
            pick = r;
            break;
        }
    ListenAddress out;
    std::memcpy(&out.addr, pick->ai_addr, pick->ai_addrlen);
    out.len = pick->ai_addrlen;
    ::freeaddrinfo(res);
    return out;
}

Fd listenOn(const std::string& address, int* port)
{
    const ListenAddress la = parseListenAddress(address);
    const int family = la.addr.ss_family;
    Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd)
        throwErrno(listenPrefix(address) + "socket");
    const int on = 1;
    checkErrno(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)),
               listenPrefix(address) + "SO_REUSEADDR");
    if (family == AF_INET6)
        checkErrno(::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)),
                   listenPrefix(address) + "IPV6_V6ONLY");
    checkErrno(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&la.addr), la.len), listenPrefix(address) + "bind");
    checkErrno(::listen(fd.get(), SOMAXCONN), listenPrefix(address) + "listen");
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    checkErrno(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len),
               listenPrefix(address) + "getsockname");
    *port = ntohs(family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                     : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    return fd;
}

// ---- HTTP ----------------------------------------------------------------------------

bool iequals(std::string_view a, std::string_view b)
{
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

// The offset just past the blank line that ends the headers ("\r\n\r\n", or
// "\n\n" from a lenient client), searching from `from`; npos if not there yet.
size_t headerEnd(const std::string& in, size_t from)
{
    for (size_t i = from; i < in.size(); i++) {
        if (in[i] != '\n')
            continue;
        if (i >= 1 && in[i - 1] == '\n')
            return i + 1;
        if (i >= 2 && in[i - 1] == '\r' && in[i - 2] == '\n')
            return i + 1;
    }
    return std::string::npos;
}

// True if an Accept-Encoding header lists gzip (or *) with a q other than 0.
bool acceptsGzip(std::string_view headers)
{
    while (!headers.empty()) {
        const size_t nl = headers.find('\n');
        const std::string_view line = headers.substr(0, nl);
        headers = nl == std::string_view::npos ? std::string_view() : headers.substr(nl + 1);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || !iequals(trim(line.substr(0, colon)), "accept-encoding"))
            continue;
        std::string_view list = line.substr(colon + 1);
        while (!list.empty()) {
            const size_t comma = list.find(',');
            std::string_view item = list.substr(0, comma);
            list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
            const size_t semi = item.find(';');
            const std::string_view coding = trim(item.substr(0, semi));
            if (!iequals(coding, "gzip") && coding != "*")
                continue;
            if (semi == std::string_view::npos)
                return true;
            const std::string_view param = trim(item.substr(semi + 1));
            if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=' &&
                std::strtod(std::string(param.substr(2)).c_str(), nullptr) <= 0)
                continue;
            return true;
        }
    }
    return false;
}

bool gzip(const std::string& in, std::string* out)
{
    z_stream zs{};
    if (in.size() > std::numeric_limits<uInt>::max() ||
        ::deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16 /* gzip wrapper */, 8, Z_DEFAULT_STRATEGY) !=
            Z_OK)
        return false;
    out->resize(::deflateBound(&zs, uLong(in.size())) + 64);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = uInt(in.size());
    zs.next_out = reinterpret_cast<Bytef*>(out->data());
    zs.avail_out = uInt(out->size());
    const int rc = ::deflate(&zs, Z_FINISH);
    out->resize(zs.total_out);
    ::deflateEnd(&zs);
    return rc == Z_STREAM_END;
}

const char* reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

std::string responseHead(int status, size_t length, const char* extra = "", const char* type = kTextType)
{
    return "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\nContent-Type: " + type +
           "\r\nContent-Length: " + std::to_string(length) + "\r\n" + extra + "Connection: close\r\n\r\n";
}

// "/metrics, /healthz": what a 404 names.
std::string describePaths(const std::vector<HttpRoute>& routes)
{
    std::string out;
    for (const HttpRoute& r : routes)
        out += (out.empty() ? "" : ", ") + r.path;
    return out;
}

} // namespace

// ---- the loop --------------------------------------------------------------------------

class MetricsServer::Loop {
public:
    Loop(Fd listener, int stopFd, std::vector<HttpRoute> routes, OnReply onReply, MetricsServerLimits limits)
        : listener_(std::move(listener)), routes_(std::move(routes)), onReply_(std::move(onReply)), limits_(limits)
    {
        epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
        if (!epoll_)
            throwErrno("metrics: epoll_create1");
        add(stopFd, EPOLLIN, kStopId);
        add(listener_.get(), EPOLLIN, kListenerId);
    }

    void run() noexcept;
    MetricsServerStats stats() const noexcept
    {
        MetricsServerStats s;
        s.accepted = accepted_.load(std::memory_order_relaxed);
        s.scrapes = scrapes_.load(std::memory_order_relaxed);
        s.errors = errors_.load(std::memory_order_relaxed);
        s.timedOut = timedOut_.load(std::memory_order_relaxed);
        s.evicted = evicted_.load(std::memory_order_relaxed);
        s.acceptPauses = acceptPauses_.load(std::memory_order_relaxed);
        return s;
    }

private:
    enum class State { Request, Response, Linger };
    struct Conn {
        Fd fd;
        State state = State::Request;
        uint64_t deadlineNs = 0;
        uint32_t events = 0; // as registered with epoll
        std::string in;      // the request so far (at most maxHeaderBytes)
        std::string out;     // the response
        size_t sent = 0;
        size_t bodyBytes = 0; // of a scrape's response (0: not a scrape)
        uint64_t answeredNs = 0;
    };
    using Conns = std::map<uint64_t, Conn>; // by id: accept order

    void add(int fd, uint32_t events, uint64_t id)
    {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = id;
        checkErrno(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev), "metrics: epoll_ctl");
    }
    void watch(Conns::iterator it, uint32_t events)
    {
        if (it->second.events == events)
            return;
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = it->first;
        checkErrno(::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, it->second.fd.get(), &ev), "metrics: epoll_ctl");
        it->second.events = events;
    }

    int timeoutMs(uint64_t now) const;
    void expire(uint64_t now);
    void acceptSome(uint64_t now);
    void pauseAccept(uint64_t now, int err);
    void evictOne();
    void handle(Conns::iterator it, uint32_t events, uint64_t now);
    void readRequest(Conns::iterator it, uint64_t now);
    void answer(Conns::iterator it, size_t headEnd, uint64_t now);
    void serve(Conns::iterator it, const HttpRoute& route, bool head, std::string_view headers, uint64_t now);
    void respond(Conns::iterator it, int status, std::string head, std::string body, uint64_t now);
    void writeResponse(Conns::iterator it);
    void linger(Conns::iterator it);

    Fd epoll_, listener_;
    std::vector<HttpRoute> routes_;
    OnReply onReply_;
    MetricsServerLimits limits_;
    Conns conns_;
    uint64_t nextId_ = 2;
    uint64_t resumeAcceptNs_ = 0; // listener out of epoll until then (0: in)
    std::atomic<uint64_t> accepted_{0}, scrapes_{0}, errors_{0}, timedOut_{0}, evicted_{0}, acceptPauses_{0};
};

void MetricsServer::Loop::run() noexcept
{
    epoll_event events[64];
    for (;;) {
        uint64_t now = monotonicNs();
        expire(now);
        if (resumeAcceptNs_ && now >= resumeAcceptNs_) {
            try {
                add(listener_.get(), EPOLLIN, kListenerId);
                resumeAcceptNs_ = 0;
            } catch (const std::exception& e) {
                NPF_WARN_RL("npfd: metrics: %s", e.what());
                resumeAcceptNs_ = now + toNs(limits_.acceptBackoff);
            }
        }
        const int n = ::epoll_wait(epoll_.get(), events, int(std::size(events)), timeoutMs(now));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            NPF_ERR("npfd: metrics: epoll_wait: %s; the metrics endpoint stops", std::strerror(errno));
            return;
        }
        now = monotonicNs();
        for (int i = 0; i < n; i++) {
            const uint64_t id = events[i].data.u64;
            if (id == kStopId)
                return;
            try {
                if (id == kListenerId) {
                    acceptSome(now);
                    continue;
                }
                auto it = conns_.find(id);
                if (it != conns_.end()) // else closed earlier in this batch
                    handle(it, events[i].events, now);
            } catch (const std::exception& e) {
                NPF_WARN_RL("npfd: metrics: %s", e.what());
                if (id != kListenerId)
                    conns_.erase(id);
            }
        }
    }
}

int MetricsServer::Loop::timeoutMs(uint64_t now) const
{
    uint64_t next = resumeAcceptNs_ ? resumeAcceptNs_ : UINT64_MAX;
    for (const auto& [id, c] : conns_)
        next = std::min(next, c.deadlineNs);
    if (next == UINT64_MAX)
        return -1;
    if (next <= now)
        return 0;
    return int(std::min<uint64_t>((next - now + 999999) / 1000000, 60000)); // rounded up: woken past it
}

void MetricsServer::Loop::expire(uint64_t now)
{
    for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->second.deadlineNs > now) {
            ++it;
            continue;
        }
        if (it->second.state != State::Linger) {
            timedOut_.fetch_add(1, std::memory_order_relaxed);
            NPF_DEBUG("npfd: metrics: connection closed at its deadline (%s)",
                      it->second.state == State::Request ? "request not complete" : "response not taken");
        }
        it = conns_.erase(it);
    }
}

void MetricsServer::Loop::acceptSome(uint64_t now)
{
    for (int i = 0; i < kAcceptBatch; i++) {
        Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd) {
            switch (errno) {
            case EAGAIN: return;
            case EINTR:
            case ECONNABORTED:
            case EPROTO:
            case EPERM: // a firewall rule
            case ENETDOWN:
            case ENOPROTOOPT:
            case EHOSTDOWN:
            case ENONET:
            case EHOSTUNREACH:
            case EOPNOTSUPP:
            case ENETUNREACH: continue; // that connection's problem
            default: pauseAccept(now, errno); return;
            }
        }
        if (conns_.size() >= limits_.maxConnections)
            evictOne();
        accepted_.fetch_add(1, std::memory_order_relaxed);
        const uint64_t id = nextId_++;
        auto it = conns_.emplace(id, Conn{}).first;
        it->second.fd = std::move(fd);
        it->second.deadlineNs = now + toNs(limits_.requestDeadline);
        it->second.events = EPOLLIN;
        add(it->second.fd.get(), EPOLLIN, id);
        readRequest(it, now); // a scraper's request is usually there already
    }
}

// Out of descriptors or memory: accepting again at once would fail again
// (the listener stays readable: a busy loop). Out of epoll for a while.
void MetricsServer::Loop::pauseAccept(uint64_t now, int err)
{
    NPF_WARN_RL("npfd: metrics: accept: %s; not accepting for %lld ms", std::strerror(err),
                static_cast<long long>(limits_.acceptBackoff.count()));
    acceptPauses_.fetch_add(1, std::memory_order_relaxed);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr) != 0)
        NPF_WARN_RL("npfd: metrics: epoll_ctl: %s", std::strerror(errno));
    resumeAcceptNs_ = now + toNs(limits_.acceptBackoff);
}

// Full: the connection that has had the most of its time goes. One that
// was already answered first (it only waits for the peer's close), then the
// one closest to its deadline, the oldest of those.
void MetricsServer::Loop::evictOne()
{
    auto victim = conns_.end();
    for (auto it = conns_.begin(); it != conns_.end(); ++it) {
        if (victim == conns_.end()) {
            victim = it;
            continue;
        }
        const bool lingers = it->second.state == State::Linger, victimLingers = victim->second.state == State::Linger;
        if (lingers != victimLingers ? lingers : it->second.deadlineNs < victim->second.deadlineNs)
            victim = it;
    }
    if (victim == conns_.end())
        return;
    if (victim->second.state != State::Linger) {
        evicted_.fetch_add(1, std::memory_order_relaxed);
        NPF_WARN_RL("npfd: metrics: %zu connections open: closing the one closest to its deadline",
                    limits_.maxConnections);
    }
    conns_.erase(victim);
}

void MetricsServer::Loop::handle(Conns::iterator it, uint32_t events, uint64_t now)
{
    switch (it->second.state) {
    case State::Request: readRequest(it, now); break;
    case State::Response:
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            writeResponse(it);
        break;
    case State::Linger: linger(it); break;
    }
}

void MetricsServer::Loop::readRequest(Conns::iterator it, uint64_t now)
{
    Conn& c = it->second;
    char buf[4096];
    for (;;) {
        const size_t room = limits_.maxHeaderBytes - c.in.size();
        const ssize_t n = ::recv(c.fd.get(), buf, std::min(room, sizeof(buf)), 0);
        if (n == 0) { // closed before the request was complete
            conns_.erase(it);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                conns_.erase(it);
            return;
        }
        const size_t from = c.in.size() >= 3 ? c.in.size() - 3 : 0;
        c.in.append(buf, size_t(n));
        const size_t end = headerEnd(c.in, from);
        if (end != std::string::npos) {
            answer(it, end, now);
            return;
        }
        if (c.in.size() >= limits_.maxHeaderBytes) {
            respond(it, 431, {}, "request headers larger than " + std::to_string(limits_.maxHeaderBytes) + " bytes\n",
                    now);
            return;
        }
    }
}

void MetricsServer::Loop::answer(Conns::iterator it, size_t headEnd, uint64_t now)
{
    const std::string_view request(it->second.in.data(), headEnd);
    const size_t eol = request.find('\n');
    const std::string_view line = trim(request.substr(0, eol));
    const std::string_view headers = request.substr(eol + 1);
    // METHOD SP TARGET SP HTTP/1.x
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1 || line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0 ||
        line.substr(sp2 + 1).size() != 8) {
        respond(it, 400, {}, "expected GET " + routes_.front().path + " HTTP/1.1\n", now);
        return;
    }
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view path = target.substr(0, target.find('?'));
    const auto route = std::find_if(routes_.begin(), routes_.end(), [&](const HttpRoute& r) { return r.path == path; });
    if (route == routes_.end()) {
        respond(it, 404, {}, "only " + describePaths(routes_) + " here\n", now);
        return;
    }
    const bool head = method == "HEAD";
    if (method != "GET" && !head) {
        respond(it, 405, "Allow: GET, HEAD\r\n", "only GET and HEAD\n", now);
        return;
    }
    serve(it, *route, head, headers, now);
}

void MetricsServer::Loop::serve(Conns::iterator it, const HttpRoute& route, bool head, std::string_view headers,
                                uint64_t now)
{
    HttpPage page;
    try {
        page = route.page();
    } catch (const std::exception& e) {
        NPF_WARN_RL("npfd: metrics: %s failed: %s", route.path.c_str(), e.what());
        respond(it, 500, {}, route.path + " failed\n", now);
        return;
    }
    if (page.status != 200) {
        respond(it, page.status, {}, head ? std::string() : std::move(page.body), now);
        return;
    }
    const char* encoding = "";
    std::string zipped;
    if (route.scrape && acceptsGzip(headers) && gzip(page.body, &zipped)) {
        page.body.swap(zipped);
        encoding = "Content-Encoding: gzip\r\n";
    }
    Conn& c = it->second;
    c.bodyBytes = route.scrape ? page.body.size() : 0;
    c.answeredNs = now;
    c.out = responseHead(200, page.body.size(), encoding, route.scrape ? kScrapeType : kTextType);
    if (!head)
        c.out += page.body;
    if (route.scrape)
        scrapes_.fetch_add(1, std::memory_order_relaxed);
    c.state = State::Response;
    c.deadlineNs = now + toNs(limits_.responseDeadline);
    c.in = std::string();
    writeResponse(it);
}

void MetricsServer::Loop::respond(Conns::iterator it, int status, std::string extra, std::string body, uint64_t now)
{
    errors_.fetch_add(1, std::memory_order_relaxed);
    Conn& c = it->second;
    c.out = responseHead(status, body.size(), extra.c_str()) + body;
    c.state = State::Response;
    c.deadlineNs = now + toNs(limits_.responseDeadline);
    c.in = std::string();
    writeResponse(it);
}

void MetricsServer::Loop::writeResponse(Conns::iterator it)
{
    Conn& c = it->second;
    while (c.sent < c.out.size()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n > 0) {
            c.sent += size_t(n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            watch(it, EPOLLOUT);
            return;
        } else { // the peer went away
            conns_.erase(it);
            return;
        }
    }
    const uint64_t now = monotonicNs();
    if (c.bodyBytes && onReply_)
        onReply_(c.bodyBytes, std::chrono::nanoseconds(now - c.answeredNs));
    // Sent: our side is done. Wait (briefly) for the peer's close rather
    // than closing with bytes of its still unread, which would reset the
    // connection and could destroy the response before the peer read it.
    ::shutdown(c.fd.get(), SHUT_WR);
    c.out = std::string();
    c.state = State::Linger;
    c.deadlineNs = now + toNs(limits_.lingerDeadline);
    watch(it, EPOLLIN);
    linger(it);
}

void MetricsServer::Loop::linger(Conns::iterator it)
{
    char buf[4096];
    for (;;) {
        const ssize_t n = ::recv(it->second.fd.get(), buf, sizeof(buf), 0);
        if (n > 0)
            continue; // whatever else it sent is discarded
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        conns_.erase(it); // its close (or an error)
        return;
    }
}

// ---- MetricsServer ---------------------------------------------------------------------

std::string MetricsServer::listenPrefix(const std::string& address) { return "metrics: listen on " + address + ": "; }

MetricsServer::MetricsServer(const std::string& address, Render render, OnReply onReply, MetricsServerLimits limits)
    : MetricsServer(address,
                    {HttpRoute{"/metrics", [r = std::move(render)] { return HttpPage{200, r()}; }, true}},
                    std::move(onReply), limits)
{
}

MetricsServer::MetricsServer(const std::string& address, std::vector<HttpRoute> routes, OnReply onReply,
                             MetricsServerLimits limits)
{
    if (limits.maxConnections == 0 || limits.maxHeaderBytes < 64 || routes.empty())
        throw std::invalid_argument("metrics: maxConnections must be > 0, maxHeaderBytes >= 64, a route given");
    Fd listener = listenOn(address, &port_);
    stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop_)
        throwErrno("metrics: eventfd");
    loop_ = std::make_unique<Loop>(std::move(listener), stop_.get(), std::move(routes), std::move(onReply), limits);
    // Signals go to npfd's other threads, not this one.
    sigset_t all, old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &old);
    try {
        thread_ = std::thread([loop = loop_.get()] { loop->run(); });
    } catch (...) {
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        throw;
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::pthread_setname_np(thread_.native_handle(), "npf-metrics");
}

MetricsServer::~MetricsServer()
{
    const uint64_t one = 1;
    if (::write(stop_.get(), &one, sizeof(one)) != sizeof(one))
        NPF_ERR("npfd: metrics: cannot stop the server thread: %s", std::strerror(errno));
    thread_.join();
}

MetricsServerStats MetricsServer::stats() const noexcept { return loop_->stats(); }

} // namespace npf::daemon

namespace npf::daemon {

void checkListenAddress(const std::string& flag, const std::string& a)
{
    const size_t colon = a.rfind(':');
    const std::string host = colon == std::string::npos ? "" : a.substr(0, colon);
    const std::string port = colon == std::string::npos ? a : a.substr(colon + 1);
    char* end = nullptr;
    const unsigned long p = port.empty() ? 0 : std::strtoul(port.c_str(), &end, 10);
    const bool portOk = !port.empty() && *end == '\0' && port.find_first_not_of("0123456789") == std::string::npos &&
                        p >= 1 && p <= 65535;
    const bool v6 = host.size() > 2 && host.front() == '[' && host.back() == ']';
    const bool hostOk = colon == std::string::npos || v6 || (!host.empty() && host.find(':') == std::string::npos);
    if (!portOk || !hostOk)
        throw ArgumentError(flag + " " + a + ": expected ADDR:PORT (127.0.0.1:9100, [::1]:9100) or PORT");
}

std::unique_ptr<MetricsServer> serveHttp(const std::string& flag, const std::string& address,
                                         std::vector<HttpRoute> routes, MetricsServer::OnReply onReply)
{
    checkListenAddress(flag, address);
    try {
        return std::make_unique<MetricsServer>(address, std::move(routes), std::move(onReply));
    } catch (const std::invalid_argument& e) { // "metrics ADDR: ..."
        const std::string why = e.what();
        throw ArgumentError(flag + why.substr(why.find(' ')));
    } catch (const std::system_error& e) {
        const int err = e.code().value();
        const char* hint = err == EADDRINUSE      ? " (the port is in use)"
                           : err == EADDRNOTAVAIL ? " (the address is not one of this host's)"
                           : err == EACCES        ? " (a port below 1024 needs CAP_NET_BIND_SERVICE)"
                                                  : "";
        std::string why = e.what();
        if (const std::string prefix = MetricsServer::listenPrefix(address); why.rfind(prefix, 0) == 0)
            why.erase(0, prefix.size());
        throw Error(err, flag + " " + address + ": cannot listen there: " + why + hint);
    }
}

} // namespace npf::daemon
