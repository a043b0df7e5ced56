// Kernel object introspection: program names and the maps a program uses.
#pragma once

#include <bpf/bpf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npf::dataplane {

// Name of loaded program `id` ("" if it is gone).
std::string progName(uint32_t id);

// Ids of the maps program `id` uses (empty if it is gone).
std::vector<uint32_t> progMapIds(uint32_t id);

// Kernel info of the map behind `fd`; throws naming `what`.
bpf_map_info mapInfo(int fd, const std::string& what);

// The shape of the map behind `fd` (type, key_size, value_size,
// max_entries, map_flags; the rest zero) from /proc/self/fdinfo: no bpf(2)
// call, so a process whose seccomp profile denies bpf (an npfd client in a
// container) can check a map it was handed. Throws naming `what` if `fd` is
// not a BPF map.
bpf_map_info mapShape(int fd, const std::string& what);

// A loaded program named `name` that uses map `mapId`, if any.
std::optional<uint32_t> findProgUsingMap(uint32_t mapId, const std::string& name);

} // namespace npf::dataplane
