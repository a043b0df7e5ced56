// A memory cgroup of the test's own with a memory limit, for a process the
// test starts in it: cgroup v2 where the unified hierarchy carries the memory
// controller and its top delegates it (cgroup.subtree_control), else cgroup
// v1's memory hierarchy (this machine's hybrid layout). A CgroupDir. Root.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cgroup_dir.h"
#include "daemon/cgroup_memory.h"
#include "e2e_rig.h"

namespace npf::test {

class MemoryCgroup : public CgroupDir {
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
    bool v2() const { return v2_; }
    std::string limitFile() const { return dir() + (v2_ ? "/memory.max" : "/memory.limit_in_bytes"); }
    // Bytes charged to it now (memory.current; v1: memory.usage_in_bytes).
    uint64_t usage() const
    {
        return std::stoull(e2e::readFile(dir() + (v2_ ? "/memory.current" : "/memory.usage_in_bytes")));
    }

private:
    static bool carriesMemory(const daemon::CgroupMount& m)
    {
        if (!m.v2)
            return true; // a v1 mount is listed only with the memory controller
        std::string control = e2e::readFile(m.point + "/cgroup.subtree_control");
        return control.find("memory") != std::string::npos;
    }
    MemoryCgroup(const daemon::CgroupMount& m, uint64_t limitBytes) : CgroupDir(m.point, "npfmem"), v2_(m.v2)
    {
        std::ofstream(limitFile()) << limitBytes;
        if (daemon::parseMemoryLimit(e2e::readFile(limitFile())) != limitBytes)
            throw std::runtime_error("could not set " + limitFile());
    }

    bool v2_ = false;
};

} // namespace npf::test
