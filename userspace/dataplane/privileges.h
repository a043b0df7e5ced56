// Control-plane operations need bpf() and netlink privileges; check them up
// front so the user gets "run as root" instead of an obscure EPERM later.
#pragma once

#include <string>

namespace npf::dataplane {

// True if the process has CAP_SYS_ADMIN, or CAP_BPF and CAP_NET_ADMIN.
bool hasBpfPrivileges();

// Throws Error(EPERM) saying `what` needs root unless hasBpfPrivileges().
void requireBpfPrivileges(const std::string& what);

} // namespace npf::dataplane
