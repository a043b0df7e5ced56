#include "cli/exit_codes.h"

#include "npf/error.h"

namespace npf::cli {

int exitCodeFor(const std::exception& e)
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

} // namespace npf::cli
