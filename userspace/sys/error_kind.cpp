// npf/error.h's errorKind: the kind of a failure libnpf threw, from the
// internal error classes (sys/error.h) the public header does not show. The
// programs' exit codes (npf_exit_codes.h) are chosen by it too.
#include "npf/error.h"

#include <stdexcept>
#include <system_error>

#include "sys/error.h"

namespace npf {

ErrorKind errorKind(const std::exception& e) noexcept
{
    if (dynamic_cast<const ArgumentError*>(&e) || dynamic_cast<const std::invalid_argument*>(&e))
        return ErrorKind::Argument;
    if (dynamic_cast<const StateError*>(&e))
        return ErrorKind::Conflict;
    if (auto* se = dynamic_cast<const std::system_error*>(&e)) {
        if (se->code().category() == std::generic_category() || se->code().category() == std::system_category()) {
            switch (se->code().value()) {
            case EPERM:
            case EACCES: return ErrorKind::Permission;
            case ENODEV: return ErrorKind::NoDevice;
            default: break;
            }
        }
    }
    return ErrorKind::Failure;
}

} // namespace npf
