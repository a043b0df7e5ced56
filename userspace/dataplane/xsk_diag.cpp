#include "dataplane/xsk_diag.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/xdp_diag.h>

#include <cstring>

#include "dataplane/netlink.h"
#include "sys/error.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

namespace npf::dataplane {
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
    NetlinkRequest<xdp_diag_req> msg(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP);
    msg.body.sdiag_family = AF_XDP;
    msg.body.xdiag_show = XDP_SHOW_INFO | XDP_SHOW_UMEM;

    std::vector<XdpSocket> out;
    try {
        netlinkRequest(NETLINK_SOCK_DIAG, msg.nh, "list AF_XDP sockets (sock_diag)", [&](const nlmsghdr& h) {
            if (h.nlmsg_type != SOCK_DIAG_BY_FAMILY || h.nlmsg_len < NLMSG_LENGTH(sizeof(xdp_diag_msg)))
                return true;
            auto* m = static_cast<const xdp_diag_msg*>(NLMSG_DATA(&h));
            XdpSocket s;
            s.inode = m->xdiag_ino;
            parseAttrs(m, h.nlmsg_len - NLMSG_HDRLEN, &s);
            out.push_back(s);
            return true;
        });
    } catch (const std::system_error& e) {
        if (e.code().value() == ENOENT) // no sock_diag handler for AF_XDP
            throwErrno(ENOENT, "list AF_XDP sockets: the kernel has no AF_XDP sock_diag (CONFIG_XDP_SOCKETS_DIAG)");
        throw;
    }
    return out;
}

} // namespace npf::dataplane
