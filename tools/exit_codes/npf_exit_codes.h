// The exit codes of every npf program (npfctl, npfd, npf-recv; documented in
// docs/cli.md, "Exit codes"), chosen by the kind of failure libnpf reports
// (npf/error.h). Header-only on the public API alone: npf-recv, which may use
// nothing internal, and the internal tools (through cli/exit_codes.h) share it.
#pragma once

#include <exception>

#include "npf/error.h"

namespace npf::exit_codes {

enum ExitCode : int {
    kExitOk = 0,
    kExitFailure = 1,    // runtime failure
    kExitUsage = 2,      // usage / bad arguments
    kExitPermission = 3, // not root / EPERM
    kExitNoDevice = 4,   // no such interface
    kExitConflict = 5,   // already attached / foreign program / not attached / flow conflicts / another
                         // engine serves the interface
    kExitMemoryLimit = 6, // npfd: what it would pin does not fit its cgroup's memory limit (not an error kind:
                          // npfd maps its own check, daemon/memory_limit.h)
};

// The exit code for an exception thrown by a command.
inline int exitCodeFor(const std::exception& e) noexcept
{
    switch (errorKind(e)) {
    case ErrorKind::Argument: return kExitUsage;
    case ErrorKind::Permission: return kExitPermission;
    case ErrorKind::NoDevice: return kExitNoDevice;
    case ErrorKind::Conflict: return kExitConflict;
    case ErrorKind::Failure: break;
    }
    return kExitFailure;
}

} // namespace npf::exit_codes
