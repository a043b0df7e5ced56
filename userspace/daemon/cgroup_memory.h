// The memory limit the kernel holds this process to through its cgroup: the
// smallest limit from its memory cgroup up to the top of the hierarchy as
// mounted here (a container sees its own cgroup as the top). cgroup v2:
// memory.max of each level of the unified hierarchy (the `0::` line of
// /proc/self/cgroup); cgroup v1: memory.limit_in_bytes of each level of the
// hierarchy with the memory controller (its line there). A hybrid layout
// (v1 controllers, a v2 hierarchy without memory) is read where memory is.
// npfd compares what it will pin with it (daemon/memory_limit.h): above it,
// the kernel's OOM killer ends npfd instead of an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npf::daemon {

struct MemoryLimit {
    uint64_t bytes = 0;
    std::string file; // where it was read: "/sys/fs/cgroup/kubepods/pod1/npfd/memory.max"
};

// nullopt: no limit (none set, or no memory controller mounted).
std::optional<MemoryLimit> cgroupMemoryLimit();

// ---- the parts, each a parser of one file's text ------------------------------

// A mounted cgroup hierarchy that can carry the memory controller: every
// cgroup2 mount, and cgroup v1 mounts whose options name "memory".
struct CgroupMount {
    bool v2 = false;
    std::string root;  // the cgroup at the mount point ("/": the top)
    std::string point; // where it is mounted
};
// From /proc/self/mountinfo.
std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo);

// From /proc/self/cgroup: the process's cgroup in the v2 hierarchy (the
// `0::` line) and in the v1 hierarchy with the memory controller; "" when
// there is none.
struct ProcCgroups {
    std::string v2;
    std::string v1Memory;
};
ProcCgroups parseProcCgroup(std::string_view text);

// A limit file's value: "max" (v2) or a number of bytes; nullopt for no
// limit ("max", or v1's page-rounded LONG_MAX: anything from 2^62 up) or
// for text that is not a limit.
std::optional<uint64_t> parseMemoryLimit(std::string_view text);

// The directories whose limits bind a process in cgroup `path` of the
// hierarchy `m`, from its own up to the mount point; empty if `path` is
// not below the mount's root (outside what this mount shows).
std::vector<std::string> limitDirs(const CgroupMount& m, const std::string& path);

} // namespace npf::daemon
