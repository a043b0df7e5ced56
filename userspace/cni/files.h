// Files as npf-cni keeps them on the node (its records, the CNI
// configuration, its own binary): read whole, and replaced whole, through a
// temporary file written, synced and renamed over, so that a reader (the
// runtime, npf-cni running for another pod) sees the old file or the new
// one, never half of either.
#pragma once

#include <string>

#include "sys/replace_file.h"

namespace npf::cni {

// Throws naming `file`.
std::string readWhole(const std::string& file);
// Replaced whole: npf::replaceWhole (sys/replace_file.h), synced.

} // namespace npf::cni
