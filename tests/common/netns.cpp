#include "netns.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "npf/abi.h"

namespace npf::test {

bool isRoot() { return geteuid() == 0; }

namespace {
std::string netnsKey(const Netns& ns)
{
    struct stat st {};
    if (::stat(ns.path().c_str(), &st) != 0)
        throw std::runtime_error("stat " + ns.path() + ": " + std::strerror(errno));
    return "netns-" + std::to_string(st.st_ino);
}
} // namespace

std::string pinDirOf(const Netns& ns, const std::string& ifname)
{
    return std::string(NPF_PIN_ROOT) + "/" + netnsKey(ns) + "/" + ifname;
}

std::string runDirOf(const Netns& ns, const std::string& ifname)
{
    return "/run/npf/" + netnsKey(ns) + "/" + ifname;
}

} // namespace npf::test
