// Control-plane operations need bpf() and netlink privileges; check them up
// front so the user gets "run as root" instead of an obscure EPERM later.
#pragma once

#include <string>

namespace npf::dataplane {

// True if the process has CAP_SYS_ADMIN, or CAP_BPF and CAP_NET_ADMIN.
bool hasBpfPrivileges();

// True if the process may open BPF programs and maps by id
// (BPF_PROG_GET_FD_BY_ID, BPF_MAP_GET_FD_BY_ID, BPF_PROG_GET_NEXT_ID): the
// kernel allows them with CAP_SYS_ADMIN only. npf needs them only to name
// programs it did not pin (foreign ones, libxdp's dispatcher); what it
// attached, it reaches through its pins.
bool canOpenBpfById();

// Throws Error(EPERM) saying `what` needs root unless hasBpfPrivileges().
void requireBpfPrivileges(const std::string& what);

} // namespace npf::dataplane
