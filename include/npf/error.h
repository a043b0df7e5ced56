// What libnpf throws, which kind of failure it reports, and the check of a
// flow address a program may make before anything is attached.
//
// The control plane (constructors, openFlow, closeFlow, stats, ...) throws
// std::system_error whose message names what failed on which object and
// whose code is an errno (std::generic_category): EPERM or EACCES for
// missing privileges, ENODEV for an interface that does not exist in the
// calling thread's network namespace. A bad argument to a Flow or to
// closeFlow is std::invalid_argument. The hot path (Flow::poll, wait, arm)
// throws nothing: it returns a negative errno (npf/engine.h).
#pragma once

#include <exception>
#include <string>

namespace npf {

enum class ErrorKind {
    Failure,    // anything else: a runtime failure
    Argument,   // a bad argument: port, address, interface name, sizes, a buffer outside the region
    Permission, // missing privileges (EPERM, EACCES)
    NoDevice,   // no such interface (ENODEV)
    Conflict,   // the request conflicts with the interface's state: npf attached by another
                // instance, a foreign XDP program, another engine serving the interface, the
                // flow open already, no free flow id
};

// The kind of failure `e`, thrown by libnpf, reports: what a program tells
// its user (npf-recv and npfctl map it to their exit codes). An exception
// libnpf did not throw is a Failure, or Argument for std::invalid_argument,
// or Permission / NoDevice for a std::system_error with that errno.
ErrorKind errorKind(const std::exception& e) noexcept;

// Throws a std::system_error of kind Argument unless `addr` is "" (any
// address) or an IPv4 or IPv6 destination address Engine::openFlow and
// Client::openFlow accept: for a program that checks its arguments before
// it constructs an Engine (which attaches the XDP program).
void checkFlowAddress(const std::string& addr);

} // namespace npf
