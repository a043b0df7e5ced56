// npfctl's exit codes: the control plane's, shared with npf-recv.
#pragma once

#include "ctl/exit_codes.h"

namespace npf::cli {

using ctl::ExitCode;
using ctl::exitCodeFor;
using ctl::kExitConflict;
using ctl::kExitFailure;
using ctl::kExitNoDevice;
using ctl::kExitOk;
using ctl::kExitPermission;
using ctl::kExitUsage;

} // namespace npf::cli
