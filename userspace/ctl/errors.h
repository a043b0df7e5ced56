// Error classes of the control plane. All are std::system_error, so callers
// that only care about "it failed" catch that; the CLI maps the classes to
// exit codes. Unknown interfaces are ENODEV, missing privileges EPERM/EACCES.
#pragma once

#include <cerrno>
#include <string>
#include <system_error>

namespace npf::ctl {

// The request conflicts with the interface's state: npf already attached,
// a foreign XDP program present, npf not attached, duplicate or missing flow.
// what() is the message alone: it already says what to do.
class StateError : public std::system_error {
public:
    StateError(int err, const std::string& what)
        : std::system_error(err, std::generic_category(), what), msg_(what)
    {
    }
    const char* what() const noexcept override { return msg_.c_str(); }

private:
    std::string msg_;
};

// A bad argument: port, address, interface name, sizes.
class ArgumentError : public std::system_error {
public:
    explicit ArgumentError(const std::string& what)
        : std::system_error(EINVAL, std::generic_category(), what), msg_(what)
    {
    }
    const char* what() const noexcept override { return msg_.c_str(); }

private:
    std::string msg_;
};

} // namespace npf::ctl
