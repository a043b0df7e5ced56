// Network interfaces of the calling thread's network namespace.
#pragma once

#include <linux/if_link.h>

#include <cstdint>
#include <string>
#include <vector>

namespace npf::dataplane {

struct Interface {
    std::string name;
    int ifindex = 0;
};

// Throws ArgumentError unless `name` is a valid interface name (the kernel's
// rules: 1..15 characters, no '/', ':' or whitespace, not "." or ".."). The
// name is also a pin directory name, so this check guards the path too.
void validateIfname(const std::string& name);

// Validates and resolves `name`; throws std::system_error(ENODEV) naming the
// interface and the namespace caveat when it does not exist.
Interface resolveInterface(const std::string& name);

// The interface's RX queue count (ethtool channels: rx + combined). Falls back
// to 1, with a note, for devices that do not report channels.
uint32_t rxQueueCount(const std::string& ifname);

// The interface's MTU (SIOCGIFMTU).
uint32_t linkMtu(const std::string& ifname);

// All interfaces of this namespace, by ifindex.
std::vector<Interface> listInterfaces();

// All of the interface's counters (rtnetlink IFLA_STATS64), in this namespace.
// The public npf::interfaceRxDrops (npf/interface.h, defined in iface.cpp)
// reads its receive drops from them.
rtnl_link_stats64 linkStats(int ifindex);

} // namespace npf::dataplane
