#include "dataplane/iface.h"

#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cctype>
#include <cstring>
#include <memory>
#include <optional>

#include "dataplane/netlink.h"
#include "npf/interface.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/log.h"

namespace npf::dataplane {

void validateIfname(const std::string& name)
{
    auto bad = [&](const char* why) {
        throw ArgumentError("invalid interface name '" + name + "': " + why);
    };
    if (name.empty())
        bad("empty");
    if (name.size() >= IFNAMSIZ)
        bad("longer than 15 characters");
    if (name == "." || name == "..")
        bad("reserved");
    for (unsigned char c : name) {
        if (c == '/' || c == ':' || std::isspace(c) || !std::isprint(c))
            bad("contains '/', ':', whitespace or a control character");
    }
}

Interface resolveInterface(const std::string& name)
{
    validateIfname(name);
    unsigned idx = ::if_nametoindex(name.c_str());
    if (idx == 0) {
        if (errno != ENODEV && errno != ENXIO && errno != 0)
            throwErrno("look up interface " + name);
        throw Error(ENODEV, "no interface '" + name +
                                "' in this network namespace (enter the interface's namespace, "
                                "e.g. nsenter --net=/run/netns/NAME)");
    }
    return {name, static_cast<int>(idx)};
}

uint32_t rxQueueCount(const std::string& ifname)
{
    Fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock)
        throwErrno("socket for ethtool channels of " + ifname);
    ethtool_channels ch{};
    ch.cmd = ETHTOOL_GCHANNELS;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&ch);
    if (::ioctl(sock.get(), SIOCETHTOOL, &ifr) != 0) {
        NPF_INFO("%s does not report its RX queues (ethtool channels: %s); assuming 1 (set --queues)",
                 ifname.c_str(), std::strerror(errno));
        return 1;
    }
    uint32_t n = ch.rx_count + ch.combined_count;
    return n == 0 ? 1 : n;
}

uint32_t linkMtu(const std::string& ifname)
{
    Fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock)
        throwErrno("socket for the MTU of " + ifname);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    checkErrno(::ioctl(sock.get(), SIOCGIFMTU, &ifr), "MTU of " + ifname + " (SIOCGIFMTU)");
    return static_cast<uint32_t>(ifr.ifr_mtu);
}

std::vector<Interface> listInterfaces()
{
    struct Free {
        void operator()(struct if_nameindex* p) const noexcept { ::if_freenameindex(p); }
    };
    std::unique_ptr<struct if_nameindex, Free> list(::if_nameindex());
    if (!list)
        throwErrno("list network interfaces");
    std::vector<Interface> out;
    for (struct if_nameindex* p = list.get(); p->if_index != 0; ++p)
        out.push_back({p->if_name, static_cast<int>(p->if_index)});
    return out;
}

rtnl_link_stats64 linkStats(int ifindex)
{
    const std::string what = "read the counters of interface " + std::to_string(ifindex);
    NetlinkRequest<ifinfomsg> req(RTM_GETLINK, NLM_F_REQUEST);
    req.body.ifi_family = AF_UNSPEC;
    req.body.ifi_index = ifindex;
    std::optional<rtnl_link_stats64> stats;
    netlinkRequest(NETLINK_ROUTE, req.nh, what, [&](const nlmsghdr& h) {
        if (h.nlmsg_type != RTM_NEWLINK || h.nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg)))
            return true;
        int alen = static_cast<int>(IFLA_PAYLOAD(&h));
        for (auto* a = IFLA_RTA(static_cast<const ifinfomsg*>(NLMSG_DATA(&h))); RTA_OK(a, alen);
             a = RTA_NEXT(a, alen)) {
            if (a->rta_type != IFLA_STATS64 || RTA_PAYLOAD(a) < sizeof(rtnl_link_stats64))
                continue;
            stats.emplace();
            std::memcpy(&*stats, RTA_DATA(a), sizeof(*stats));
            return false;
        }
        return true;
    });
    if (!stats)
        throwErrno(ENODATA, what + ": no IFLA_STATS64 in the reply");
    return *stats;
}

} // namespace npf::dataplane

namespace npf {

InterfaceRxDrops interfaceRxDrops(const std::string& ifname)
{
    const rtnl_link_stats64 st = dataplane::linkStats(dataplane::resolveInterface(ifname).ifindex);
    return {st.rx_dropped, st.rx_missed_errors};
}

} // namespace npf
