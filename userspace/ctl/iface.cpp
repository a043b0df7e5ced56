#include "ctl/iface.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cctype>
#include <cstring>
#include <memory>

#include "ctl/errors.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/log.h"

namespace npf::ctl {

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

} // namespace npf::ctl
