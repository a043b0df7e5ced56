// The line every npf program prints for --version:
// "<program> <libnpf version> (npf ABI <NPF_ABI_VERSION>)", e.g. "npfd 0.1.0 (npf ABI 5)".
#pragma once

#include <string>

#include "npf/abi.h"
#include "npf/version.h"

namespace npf::cli {

inline std::string versionLine(const std::string& program)
{
    return program + " " NPF_VERSION_STRING " (npf ABI " + std::to_string(NPF_ABI_VERSION) + ")";
}

} // namespace npf::cli
