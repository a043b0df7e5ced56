// Files as npf-cni keeps them on the node (its records, the CNI
// configuration, its own binary): read whole, and replaced whole, through a
// temporary file written, synced and renamed over, so that a reader (the
// runtime, npf-cni running for another pod) sees the old file or the new
// one, never half of either.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace npf::cni {

// Throws naming `file`.
std::string readWhole(const std::string& file);
// Writes `bytes` to `tmp` (created, mode `mode`, not through a symlink), then
// renames it over `file`. Throws naming the step and the file.
void replaceWhole(const std::string& file, const std::string& tmp, std::string_view bytes, mode_t mode);

} // namespace npf::cni
