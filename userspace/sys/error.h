// Errors: the control plane throws std::system_error whose message names the
// object and the operation; the hot path returns -errno instead.
//
// The error classes are std::system_error too, so callers that only care
// about "it failed" catch that; the command-line tools map the classes to
// exit codes (cli/exit_codes.h). Unknown interfaces are ENODEV, missing
// privileges EPERM/EACCES.
#pragma once

#include <cerrno>
#include <string>
#include <system_error>

namespace npf {

// A std::system_error whose what() is the message verbatim: for messages that
// already say what happened and what to do, without ": <strerror>" appended.
class Error : public std::system_error {
public:
    Error(int err, const std::string& msg) : std::system_error(err, std::generic_category(), msg), msg_(msg) {}
    const char* what() const noexcept override { return msg_.c_str(); }

private:
    std::string msg_;
};

// The request conflicts with the interface's state: npf already attached,
// a foreign XDP program present, npf not attached, duplicate or missing flow.
class StateError : public Error {
public:
    using Error::Error;
};

// A bad argument: port, address, interface name, sizes.
class ArgumentError : public Error {
public:
    explicit ArgumentError(const std::string& msg) : Error(EINVAL, msg) {}
};

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
