#include "dataplane/privileges.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys/error.h"

#ifndef CAP_BPF
#define CAP_BPF 39
#endif

namespace npf::dataplane {

namespace {

// Whether `cap` is in the process's effective set (euid 0 if capget fails).
bool hasCapability(int cap)
{
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capget, &hdr, data) != 0)
        return ::geteuid() == 0;
    return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

} // namespace

bool hasBpfPrivileges()
{
    return hasCapability(CAP_SYS_ADMIN) || (hasCapability(CAP_BPF) && hasCapability(CAP_NET_ADMIN));
}

bool canOpenBpfById() { return hasCapability(CAP_SYS_ADMIN); }

void requireBpfPrivileges(const std::string& what)
{
    if (!hasBpfPrivileges())
        throw Error(EPERM, what + " needs CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN): run as root");
}

} // namespace npf::dataplane
