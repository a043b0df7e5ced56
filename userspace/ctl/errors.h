// Error classes of the control plane. All are std::system_error, so callers
// that only care about "it failed" catch that; the CLI maps the classes to
// exit codes. Unknown interfaces are ENODEV, missing privileges EPERM/EACCES.
#pragma once

#include <cerrno>
#include <string>
#include <system_error>

namespace npf::ctl {

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

} // namespace npf::ctl
