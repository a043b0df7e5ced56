// IPv4 UDP sockets created inside a test namespace (a socket stays in the
// namespace it was created in, whichever thread uses it later).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "netns.h"
#include "sys/fd.h"

namespace npf::itest {

class UdpSocket {
public:
    // Bound to addr:port in ns (port 0: any free port).
    UdpSocket(const test::Netns& ns, const std::string& addr, uint16_t port);

    // One datagram; throws if it cannot be sent whole.
    void sendTo(const std::string& addr, uint16_t port, const std::string& payload) const;
    // The next datagram, or nullopt when none arrives within timeout.
    std::optional<std::string> recv(std::chrono::milliseconds timeout) const;
    uint16_t port() const { return port_; }

private:
    Fd fd_;
    uint16_t port_ = 0;
};

} // namespace npf::itest
