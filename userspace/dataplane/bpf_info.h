// Kernel object introspection: program names and the maps a program uses.
#pragma once

#include <bpf/bpf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npf::dataplane {

// Name of loaded program `id`: "" if it is gone, nullopt if this process may
// not open a program by id (that needs CAP_SYS_ADMIN; privileges.h).
std::optional<std::string> progName(uint32_t id);

struct ProgInfo {
    uint32_t id = 0;
    std::vector<uint32_t> mapIds; // the maps it uses
};

// Kernel info of the program behind `fd` (one this process holds: no
// privilege needed); throws naming `what`.
ProgInfo progInfo(int fd, const std::string& what);

// Kernel info of the map behind `fd`; throws naming `what`.
bpf_map_info mapInfo(int fd, const std::string& what);

// The shape of the map behind `fd` (type, key_size, value_size,
// max_entries, map_flags; the rest zero) from /proc/self/fdinfo: no bpf(2)
// call, so a process whose seccomp profile denies bpf (an npfd client in a
// container) can check a map it was handed. Throws naming `what` if `fd` is
// not a BPF map.
bpf_map_info mapShape(int fd, const std::string& what);

} // namespace npf::dataplane
