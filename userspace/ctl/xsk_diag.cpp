#include "ctl/xsk_diag.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/xdp_diag.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "sys/error.h"
#include "sys/fd.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

namespace npf::ctl {
namespace {

void parseAttrs(const xdp_diag_msg* m, size_t len, XdpSocket* s)
{
    auto* a = reinterpret_cast<const nlattr*>(reinterpret_cast<const char*>(m) + NLMSG_ALIGN(sizeof(*m)));
    size_t left = len > NLMSG_ALIGN(sizeof(*m)) ? len - NLMSG_ALIGN(sizeof(*m)) : 0;
    while (left >= sizeof(nlattr) && a->nla_len >= sizeof(nlattr) && a->nla_len <= left) {
        const void* data = reinterpret_cast<const char*>(a) + NLA_HDRLEN;
        size_t dlen = a->nla_len - NLA_HDRLEN;
        switch (a->nla_type & NLA_TYPE_MASK) {
        case XDP_DIAG_INFO:
            if (dlen >= sizeof(xdp_diag_info)) {
                xdp_diag_info di;
                std::memcpy(&di, data, sizeof(di));
                s->ifindex = di.ifindex;
                s->queue = di.queue_id;
            }
            break;
        case XDP_DIAG_UID:
            if (dlen >= sizeof(uint32_t))
                std::memcpy(&s->uid, data, sizeof(uint32_t));
            break;
        case XDP_DIAG_UMEM:
            if (dlen >= sizeof(xdp_diag_umem)) {
                xdp_diag_umem du;
                std::memcpy(&du, data, sizeof(du));
                s->umemId = du.id;
            }
            break;
        default:
            break;
        }
        size_t step = NLA_ALIGN(a->nla_len);
        if (step >= left)
            break;
        left -= step;
        a = reinterpret_cast<const nlattr*>(reinterpret_cast<const char*>(a) + step);
    }
}

} // namespace

std::vector<XdpSocket> xdpSockets()
{
    Fd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (!nl)
        throwErrno("open NETLINK_SOCK_DIAG socket");
    struct {
        nlmsghdr nh;
        xdp_diag_req req;
    } msg{};
    msg.nh.nlmsg_len = sizeof(msg);
    msg.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.nh.nlmsg_seq = 1;
    msg.req.sdiag_family = AF_XDP;
    msg.req.xdiag_show = XDP_SHOW_INFO | XDP_SHOW_UMEM;
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    checkErrno(::sendto(nl.get(), &msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)),
               "send AF_XDP sock_diag dump request");

    std::vector<XdpSocket> out;
    alignas(nlmsghdr) char buf[32768];
    for (;;) {
        ssize_t n = ::recv(nl.get(), buf, sizeof(buf), 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throwErrno("receive AF_XDP sock_diag dump");
        }
        if (n == 0)
            return out;
        int len = static_cast<int>(n);
        for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type == NLMSG_DONE)
                return out;
            if (h->nlmsg_type == NLMSG_ERROR) {
                auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
                if (e->error == -ENOENT) // AF_XDP diag not available (xsk_diag module)
                    throwErrno(ENOENT, "list AF_XDP sockets: the kernel has no AF_XDP sock_diag (xsk_diag)");
                throwErrno(-e->error, "list AF_XDP sockets (sock_diag)");
            }
            if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(xdp_diag_msg)))
                continue;
            auto* m = static_cast<const xdp_diag_msg*>(NLMSG_DATA(h));
            XdpSocket s;
            s.inode = m->xdiag_ino;
            parseAttrs(m, h->nlmsg_len - NLMSG_HDRLEN, &s);
            out.push_back(s);
        }
    }
}

std::vector<XdpSocket> xdpSockets(int ifindex)
{
    std::vector<XdpSocket> all = xdpSockets();
    std::erase_if(all, [&](const XdpSocket& s) { return s.ifindex != static_cast<uint32_t>(ifindex); });
    return all;
}

std::vector<uint32_t> boundQueues(const std::vector<XdpSocket>& socks)
{
    std::vector<uint32_t> q;
    for (const XdpSocket& s : socks)
        if (s.ifindex != 0)
            q.push_back(s.queue);
    std::sort(q.begin(), q.end());
    q.erase(std::unique(q.begin(), q.end()), q.end());
    return q;
}

} // namespace npf::ctl
