// A cgroup of the test's own, a child of a hierarchy's top, for processes
// the test starts in it (wrapper()); removed at destruction, once what ran in
// it is gone: destroy the processes first. The base of MemoryCgroup and
// HugetlbCgroup. Root.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "netns.h"

namespace npf::test {

class CgroupDir {
public:
    CgroupDir(CgroupDir&& o) noexcept : dir_(std::exchange(o.dir_, std::string())) {}
    CgroupDir& operator=(CgroupDir&&) = delete;
    ~CgroupDir()
    {
        if (!dir_.empty())
            (void)::rmdir(dir_.c_str());
    }

    const std::string& dir() const { return dir_; }
    // A command prefix that moves itself here, then execs the rest (the
    // pid stays the program's).
    std::vector<std::string> wrapper() const
    {
        return {"sh", "-c", "echo $$ > " + dir_ + "/cgroup.procs && exec \"$@\"", "sh"};
    }

protected:
    // Makes top/<prefix><unique>; throws if it cannot.
    CgroupDir(const std::string& top, const std::string& prefix) : dir_(top + "/" + topology::uniqueName(prefix))
    {
        if (::mkdir(dir_.c_str(), 0755) != 0)
            throw std::system_error(errno, std::generic_category(), "mkdir " + std::exchange(dir_, std::string()));
    }

private:
    std::string dir_;
};

} // namespace npf::test
