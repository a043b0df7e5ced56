// One netlink request and its replies, what rtnetlink (iface.cpp: a link's
// counters) and sock_diag (xsk_diag.cpp: AF_XDP sockets) share. Header-only:
// two callers, one short loop.
#pragma once

#include <linux/netlink.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <string>

#include "sys/error.h"
#include "sys/fd.h"

namespace npf::dataplane {

// A request: the header, then the family's request body.
template <typename Body>
struct NetlinkRequest {
    NetlinkRequest(uint16_t type, uint16_t flags) noexcept : nh{}, body{}
    {
        nh.nlmsg_len = sizeof(*this);
        nh.nlmsg_type = type;
        nh.nlmsg_flags = flags;
        nh.nlmsg_seq = 1;
    }
    nlmsghdr nh;
    Body body;
};

// Sends `req` (header and payload, nlmsg_len bytes) on a new socket of
// netlink `protocol` and calls each(h) for every reply message until the
// reply ends: NLMSG_DONE or an ACK, the first datagram of a request without
// NLM_F_DUMP, or `each` returning false. An NLMSG_ERROR reply throws
// std::system_error(-error) with `what` as the message.
inline void netlinkRequest(int protocol, const nlmsghdr& req, const std::string& what,
                           const std::function<bool(const nlmsghdr&)>& each)
{
    Fd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, protocol));
    if (!nl)
        throwErrno("open netlink socket to " + what);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    checkErrno(::sendto(nl.get(), &req, req.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)),
               "send netlink request to " + what);
    const bool dump = req.nlmsg_flags & NLM_F_DUMP;
    alignas(nlmsghdr) char buf[65536];
    for (;;) {
        ssize_t n = ::recv(nl.get(), buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        checkErrno(n, "receive netlink reply to " + what);
        int len = static_cast<int>(n);
        for (auto* h = reinterpret_cast<const nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type == NLMSG_DONE)
                return;
            if (h->nlmsg_type == NLMSG_ERROR) {
                if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr)))
                    throwErrno(EBADMSG, what + ": truncated netlink error");
                const int err = static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
                if (err == 0) // an ACK
                    return;
                throwErrno(-err, what);
            }
            if (!each(*h))
                return;
        }
        if (!dump || n == 0)
            return;
    }
}

} // namespace npf::dataplane
