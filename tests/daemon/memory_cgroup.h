// A memory cgroup of the test's own with a memory limit, for a process the
// test starts in it: cgroup v2 where the unified hierarchy carries the memory
// controller and its top delegates it (cgroup.subtree_control), else cgroup
// v1's memory hierarchy (this machine's hybrid layout). A child of the
// hierarchy's top, removed at destruction (once what ran in it is gone:
// destroy the process first). Root.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "daemon/cgroup_memory.h"
#include "e2e_rig.h"
#include "netns.h"

namespace npf::test {

class MemoryCgroup {
public:
    // nullopt when neither hierarchy can carry a limit here.
    static std::optional<MemoryCgroup> create(uint64_t limitBytes)
    {
        const std::vector<daemon::CgroupMount> mounts = daemon::parseCgroupMounts(e2e::readFile("/proc/self/mountinfo"));
        for (bool v2 : {true, false})
            for (const daemon::CgroupMount& m : mounts)
                if (m.v2 == v2 && carriesMemory(m))
                    return MemoryCgroup(m, limitBytes);
        return std::nullopt;
    }
    ~MemoryCgroup()
    {
        if (!dir_.empty())
            (void)::rmdir(dir_.c_str());
    }
    MemoryCgroup(MemoryCgroup&& o) noexcept : v2_(o.v2_), dir_(std::move(o.dir_)) { o.dir_.clear(); }
    MemoryCgroup& operator=(MemoryCgroup&&) = delete;

    bool v2() const { return v2_; }
    const std::string& dir() const { return dir_; }
    std::string limitFile() const { return dir_ + (v2_ ? "/memory.max" : "/memory.limit_in_bytes"); }
    // Bytes charged to it now (memory.current; v1: memory.usage_in_bytes).
    uint64_t usage() const
    {
        return std::stoull(e2e::readFile(dir_ + (v2_ ? "/memory.current" : "/memory.usage_in_bytes")));
    }
    // A command prefix that moves itself here, then execs the rest (the
    // pid stays the program's).
    std::vector<std::string> wrapper() const
    {
        return {"sh", "-c", "echo $$ > " + dir_ + "/cgroup.procs && exec \"$@\"", "sh"};
    }

private:
    static bool carriesMemory(const daemon::CgroupMount& m)
    {
        if (!m.v2)
            return true; // a v1 mount is listed only with the memory controller
        std::string control = e2e::readFile(m.point + "/cgroup.subtree_control");
        return control.find("memory") != std::string::npos;
    }
    MemoryCgroup(const daemon::CgroupMount& m, uint64_t limitBytes)
        : v2_(m.v2), dir_(m.point + "/" + topology::uniqueName("npfmem"))
    {
        if (::mkdir(dir_.c_str(), 0755) != 0)
            throw std::system_error(errno, std::generic_category(), "mkdir " + dir_);
        std::ofstream(limitFile()) << limitBytes;
        if (daemon::parseMemoryLimit(e2e::readFile(limitFile())) != limitBytes)
            throw std::runtime_error("could not set " + limitFile());
    }

    bool v2_ = false;
    std::string dir_;
};

} // namespace npf::test
