// A file replaced whole: a temporary file written (and synced, where asked),
// then renamed over it, so that a reader sees the old file or the new one,
// never half of either.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace npf {

// Writes `bytes` to `tmp` (created, mode `mode`, not through a symlink), syncs
// it when `sync` (a reader after a crash: npf-cni's files; not a snapshot
// on tmpfs rewritten every 500 ms), then renames it over `file`. Throws
// std::system_error naming the step and the file.
void replaceWhole(const std::string& file, const std::string& tmp, std::string_view bytes, mode_t mode,
                  bool sync = true);

} // namespace npf
