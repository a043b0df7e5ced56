// npf-recv's exit codes: npfctl's (docs/cli.md, "Exit codes"), chosen by the
// kind of failure libnpf reports (npf/error.h).
#pragma once

#include <exception>

#include "npf/error.h"

namespace recv {

enum ExitCode : int {
    kExitOk = 0,
    kExitFailure = 1,    // runtime failure
    kExitUsage = 2,      // usage / bad arguments
    kExitPermission = 3, // not root / EPERM
    kExitNoDevice = 4,   // no such interface
    kExitConflict = 5,   // another engine serves the interface, the flow is open already, ...
};

inline int exitCodeFor(const std::exception& e) noexcept
{
    switch (npf::errorKind(e)) {
    case npf::ErrorKind::Argument: return kExitUsage;
    case npf::ErrorKind::Permission: return kExitPermission;
    case npf::ErrorKind::NoDevice: return kExitNoDevice;
    case npf::ErrorKind::Conflict: return kExitConflict;
    case npf::ErrorKind::Failure: break;
    }
    return kExitFailure;
}

} // namespace recv
