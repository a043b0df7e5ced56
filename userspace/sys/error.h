// Errors: the control plane throws std::system_error whose message names the
// object and the operation; the hot path returns -errno instead.
#pragma once

#include <cerrno>
#include <string>
#include <system_error>

namespace npf {

// Throws std::system_error(err) with `what` as the message: say what failed on
// which object, e.g. "attach npf_xdp to veth0 (native)".
[[noreturn]] inline void throwErrno(int err, const std::string& what)
{
    throw std::system_error(err < 0 ? -err : err, std::generic_category(), what);
}

// Throws with the current errno.
[[noreturn]] inline void throwErrno(const std::string& what)
{
    throwErrno(errno, what);
}

// For calls that return -1 and set errno: throws when rc < 0, returns rc.
template <typename T>
T checkErrno(T rc, const std::string& what)
{
    if (rc < 0)
        throwErrno(what);
    return rc;
}

// For libbpf-style calls that return a negative errno: throws when rc < 0.
inline int checkNeg(int rc, const std::string& what)
{
    if (rc < 0)
        throwErrno(-rc, what);
    return rc;
}

} // namespace npf
