// npfd's Prometheus endpoint as the tests read it: GET /metrics over HTTP
// from inside the rx namespace, the text format parsed into families (HELP,
// TYPE) and series ("name{labels}" -> value), with what is malformed in it
// (npfd_metrics_test.cpp, npfd_flow_stats_test.cpp).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "e2e_rig.h"
#include "http_client.h"
#include "netns.h"
#include "sys/fd.h"
#include "wait.h"

namespace npf::e2e {

struct Scrape {
    std::map<std::string, std::string> help, type; // by family
    std::map<std::string, double> series;          // "name{labels}" -> value
    std::vector<std::string> errors;               // format problems

    bool has(const std::string& s) const { return series.count(s) != 0; }
    double at(const std::string& s) const
    {
        auto it = series.find(s);
        return it == series.end() ? std::nan("") : it->second;
    }
};

inline bool parseNumber(const std::string& s, double& v)
{
    if (s == "NaN" || s == "Nan" || s == "+Inf" || s == "-Inf") {
        v = s == "NaN" || s == "Nan" ? std::nan("") : (s[0] == '+' ? INFINITY : -INFINITY);
        return true;
    }
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return !s.empty() && *end == '\0';
}

inline Scrape parse(const std::string& body)
{
    Scrape r;
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty())
            continue;
        std::istringstream ls(line);
        if (line[0] == '#') {
            std::string hash, kind, name, rest;
            ls >> hash >> kind >> name;
            std::getline(ls, rest);
            if (!rest.empty() && rest[0] == ' ')
                rest.erase(0, 1);
            auto& m = kind == "HELP" ? r.help : r.type;
            if (kind != "HELP" && kind != "TYPE")
                continue;
            if (!m.emplace(name, rest).second)
                r.errors.push_back("# " + kind + " twice for " + name);
            continue;
        }
        // name{labels} value  (label values here contain no spaces)
        const size_t sp = line.rfind(' ');
        const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
        double v = 0;
        if (sp == std::string::npos || !parseNumber(value, v))
            r.errors.push_back("not a number: " + line);
        if (!r.series.emplace(key, v).second)
            r.errors.push_back("series twice: " + key);
    }
    return r;
}

// A non-blocking TCP connection to 127.0.0.1:port in the rx namespace,
// established before `end` (else an empty Fd).
inline Fd connectLoopback(Rig& rig, uint16_t port, test::Clock::time_point end)
{
    test::NetnsGuard in(rig.veth().rxNs());
    return test::connectLoopback(port, end);
}

// Sends `request` to 127.0.0.1:port in the rx namespace and reads until npfd
// closes the connection, everything before `deadline` from now.
inline test::HttpReply httpExchange(Rig& rig, uint16_t port, const std::string& request,
                                    std::chrono::milliseconds deadline = test::kDeadline)
{
    const auto end = test::Clock::now() + deadline;
    const Fd fd = connectLoopback(rig, port, end);
    if (!fd) {
        test::HttpReply r;
        r.error = "cannot connect";
        return r;
    }
    return test::httpExchange(fd.get(), request, end);
}

// GET /metrics from 127.0.0.1:port in the rx namespace; the body, or "" when
// npfd did not answer 200.
inline std::string httpGet(Rig& rig, uint16_t port)
{
    const test::HttpReply r = httpExchange(rig, port, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
    return r.status == 200 ? r.body : "";
}

// A TCP socket bound to 127.0.0.1 on a port the kernel picks (*port), in
// the rx namespace.
inline Fd loopbackSocket(Rig& rig, uint16_t* port)
{
    test::NetnsGuard in(rig.veth().rxNs());
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("loopbackSocket: no port");
    *port = ntohs(a.sin_port);
    return fd;
}

// A port nothing listens on in the rx namespace (the kernel picks it).
inline uint16_t freePort(Rig& rig)
{
    uint16_t port = 0;
    (void)loopbackSocket(rig, &port);
    return port;
}

} // namespace npf::e2e
