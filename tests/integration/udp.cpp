#include "udp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <stdexcept>

#include "sys/error.h"

namespace npf::itest {
namespace {

sockaddr_in sockAddr(const std::string& addr, uint16_t port)
{
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
        throw std::invalid_argument("not an IPv4 address: " + addr);
    return sa;
}

} // namespace

UdpSocket::UdpSocket(const test::Netns& ns, const std::string& addr, uint16_t port)
{
    std::string what = "UDP socket " + addr + ":" + std::to_string(port) + " in " + ns.name();
    {
        test::NetnsGuard in(ns);
        fd_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    }
    if (!fd_)
        throwErrno("create " + what);
    sockaddr_in sa = sockAddr(addr, port);
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
        throwErrno("bind " + what);
    socklen_t len = sizeof(sa);
    if (::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
        throwErrno("getsockname " + what);
    port_ = ntohs(sa.sin_port);
}

void UdpSocket::sendTo(const std::string& addr, uint16_t port, const std::string& payload) const
{
    sockaddr_in sa = sockAddr(addr, port);
    ssize_t n = ::sendto(fd_.get(), payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&sa),
                         sizeof(sa));
    if (n < 0)
        throwErrno("send to " + addr + ":" + std::to_string(port));
    if (static_cast<size_t>(n) != payload.size())
        throw std::runtime_error("short send to " + addr + ":" + std::to_string(port));
}

std::optional<std::string> UdpSocket::recv(std::chrono::milliseconds timeout) const
{
    pollfd p{fd_.get(), POLLIN, 0};
    int n;
    do {
        n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        throwErrno("poll UDP socket port " + std::to_string(port_));
    if (n == 0)
        return std::nullopt;
    std::string buf(65536, '\0');
    ssize_t got = ::recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (got < 0)
        throwErrno("recv on UDP socket port " + std::to_string(port_));
    buf.resize(static_cast<size_t>(got));
    return buf;
}

} // namespace npf::itest
