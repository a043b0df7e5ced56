// Exit codes of npf's command-line tools (npfctl, npfd): the ones every npf
// program shares (npf_exit_codes.h, tools/exit_codes, which npf-recv uses
// too), under npf::cli.
#pragma once

#include "npf_exit_codes.h"

namespace npf::cli {

using enum exit_codes::ExitCode;
using exit_codes::ExitCode;
using exit_codes::exitCodeFor;

} // namespace npf::cli
