// A cgroup v2 child with the hugetlb controller, for a process the test
// starts in it: what its tasks allocated of 2 MiB huge pages
// (hugetlb.2MB.current). On this machine's hybrid layout hugetlb is bound to
// the unified hierarchy, not delegated from its top: the first cgroup turns
// it on there (+hugetlb in the top's cgroup.subtree_control) and leaves it
// on: turning it off under a test running in parallel would take its
// cgroups' hugetlb files away. Removed at destruction (destroy the process
// first). Root.
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

class HugetlbCgroup {
public:
    // nullopt (and *why) when no v2 hierarchy here offers hugetlb.
    static std::optional<HugetlbCgroup> create(std::string* why)
    {
        for (const daemon::CgroupMount& m : daemon::parseCgroupMounts(e2e::readFile("/proc/self/mountinfo"))) {
            if (!m.v2 || e2e::readFile(m.point + "/cgroup.controllers").find("hugetlb") == std::string::npos)
                continue;
            const bool wasOn = e2e::readFile(m.point + "/cgroup.subtree_control").find("hugetlb") != std::string::npos;
            if (!wasOn)
                std::ofstream(m.point + "/cgroup.subtree_control") << "+hugetlb";
            HugetlbCgroup cg(m.point);
            if (::mkdir(cg.dir_.c_str(), 0755) != 0 || ::access((cg.dir_ + "/hugetlb.2MB.current").c_str(), R_OK)) {
                *why = "cannot make a cgroup with hugetlb.2MB.current under " + m.point;
                return std::nullopt;
            }
            return cg;
        }
        *why = "no cgroup v2 hierarchy here offers the hugetlb controller";
        return std::nullopt;
    }
    ~HugetlbCgroup()
    {
        if (dir_.empty())
            return;
        (void)::rmdir(dir_.c_str());
    }
    HugetlbCgroup(HugetlbCgroup&& o) noexcept : dir_(std::move(o.dir_))
    {
        o.dir_.clear();
    }
    HugetlbCgroup& operator=(HugetlbCgroup&&) = delete;

    // Bytes of 2 MiB pages its tasks allocated and still hold.
    uint64_t usage() const { return std::stoull(e2e::readFile(dir_ + "/hugetlb.2MB.current")); }
    // A command prefix that moves itself here, then execs the rest.
    std::vector<std::string> wrapper() const
    {
        return {"sh", "-c", "echo $$ > " + dir_ + "/cgroup.procs && exec \"$@\"", "sh"};
    }

private:
    explicit HugetlbCgroup(const std::string& top) : dir_(top + "/" + topology::uniqueName("npfhuge")) {}

    std::string dir_;
};

} // namespace npf::test
