// Exit codes of npf's command-line tools, npfctl and npfd (documented in
// docs/cli.md and README.md; npf-recv has the same numbers, apps/exit_codes.h),
// chosen by the kind of failure (npf/error.h, npf::errorKind).
#pragma once

#include <exception>

namespace npf::cli {

enum ExitCode : int {
    kExitOk = 0,
    kExitFailure = 1,    // runtime failure
    kExitUsage = 2,      // usage / bad arguments
    kExitPermission = 3, // not root / EPERM
    kExitNoDevice = 4,   // no such interface
    kExitConflict = 5,   // already attached / foreign program / not attached / flow conflicts
};

// The exit code for an exception thrown by a command.
int exitCodeFor(const std::exception& e);

} // namespace npf::cli
