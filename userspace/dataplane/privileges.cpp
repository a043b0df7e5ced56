#include "dataplane/privileges.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys/error.h"

#ifndef CAP_BPF
#define CAP_BPF 39
#endif

namespace npf::dataplane {

bool hasBpfPrivileges()
{
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capget, &hdr, data) != 0)
        return ::geteuid() == 0;
    auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1u; };
    return has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_NET_ADMIN));
}

void requireBpfPrivileges(const std::string& what)
{
    if (!hasBpfPrivileges())
        throw Error(EPERM, what + " needs root (CAP_SYS_ADMIN, or CAP_BPF and CAP_NET_ADMIN)");
}

} // namespace npf::dataplane
