#include "cli/exit_codes.h"

#include <cerrno>
#include <system_error>

#include "sys/error.h"

namespace npf::cli {

int exitCodeFor(const std::exception& e)
{
    if (dynamic_cast<const ArgumentError*>(&e))
        return kExitUsage;
    if (dynamic_cast<const StateError*>(&e))
        return kExitConflict;
    if (auto* se = dynamic_cast<const std::system_error*>(&e)) {
        if (se->code().category() == std::generic_category() || se->code().category() == std::system_category()) {
            switch (se->code().value()) {
            case EPERM:
            case EACCES: return kExitPermission;
            case ENODEV: return kExitNoDevice;
            default: break;
            }
        }
    }
    return kExitFailure;
}

} // namespace npf::cli
