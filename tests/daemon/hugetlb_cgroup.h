// A cgroup v2 child with the hugetlb controller, for a process the test
// starts in it: what its tasks allocated of 2 MiB huge pages
// (hugetlb.2MB.current). On this machine's hybrid layout hugetlb is bound to
// the unified hierarchy, not delegated from its top: the first cgroup turns
// it on there (+hugetlb in the top's cgroup.subtree_control) and leaves it
// on: turning it off under a test running in parallel would take its
// cgroups' hugetlb files away. A CgroupDir. Root.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>

#include "cgroup_dir.h"
#include "daemon/cgroup_memory.h"
#include "e2e_rig.h"
#include "huge_pages.h"

namespace npf::test {

class HugetlbCgroup : public CgroupDir {
public:
    // nullopt (and *why) when no v2 hierarchy here offers hugetlb.
    static std::optional<HugetlbCgroup> create(std::string* why)
    {
        for (const daemon::CgroupMount& m : daemon::parseCgroupMounts(e2e::readFile("/proc/self/mountinfo"))) {
            if (!m.v2 || e2e::readFile(m.point + "/cgroup.controllers").find("hugetlb") == std::string::npos)
                continue;
            if (e2e::readFile(m.point + "/cgroup.subtree_control").find("hugetlb") == std::string::npos)
                std::ofstream(m.point + "/cgroup.subtree_control") << "+hugetlb";
            try {
                HugetlbCgroup cg(m.point);
                if (::access((cg.dir() + "/hugetlb.2MB.current").c_str(), R_OK) == 0)
                    return cg;
            } catch (const std::system_error&) {
            }
            *why = "cannot make a cgroup with hugetlb.2MB.current under " + m.point;
            return std::nullopt;
        }
        *why = "no cgroup v2 hierarchy here offers the hugetlb controller";
        return std::nullopt;
    }

    // Bytes of 2 MiB pages its tasks allocated and still hold.
    uint64_t usage() const { return std::stoull(e2e::readFile(dir() + "/hugetlb.2MB.current")); }
    // Its tasks may hold at most this many bytes of 2 MiB pages (0: none, as
    // a pod that requests no hugepages-2Mi); false if the kernel refused
    // (more held now).
    bool limit(uint64_t bytes) const
    {
        std::ofstream(dir() + "/hugetlb.2MB.max") << bytes;
        return std::stoull(e2e::readFile(dir() + "/hugetlb.2MB.max")) == bytes;
    }

private:
    explicit HugetlbCgroup(const std::string& top) : CgroupDir(top, "npfhuge") {}
};

// What a test of npfd with 2 MiB clients sets up: `pages` huge pages
// reserved and warmed (the first use of a fresh one costs milliseconds
// here), a hugetlb cgroup for npfd and one for the client. ok() false (and
// why()) when the machine cannot: the test skips.
struct HugePagesAndCgroups {
    explicit HugePagesAndCgroups(uint64_t pages) : pool(pages)
    {
        if (!pool.ok()) {
            why = "2 MiB huge pages unavailable: " + pool.why();
            return;
        }
        pool.warm();
        if (auto cg = HugetlbCgroup::create(&why))
            npfd.emplace(std::move(*cg));
        if (auto cg = HugetlbCgroup::create(&why))
            client.emplace(std::move(*cg));
    }
    bool ok() const { return npfd && client; }

    topology::HugePages pool;
    std::optional<HugetlbCgroup> npfd, client;
    std::string why;
};

} // namespace npf::test
