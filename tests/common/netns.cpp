#include "netns.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

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

NpfVeth::NpfVeth(VethOptions opt, std::string npfctl) : veth_(opt), npfctl_(std::move(npfctl))
{
    for (auto [ns, ifname] : {std::pair{&veth_.rxNs(), veth_.rxIf()}, std::pair{&veth_.txNs(), veth_.txIf()}})
        ipv6Off_ = sh(ns->exec() + "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 "
                                   "net.ipv6.conf." + ifname + ".disable_ipv6=1") == 0 && ipv6Off_;
}

NpfVeth::~NpfVeth()
{
    sh(veth_.rxNs().exec() + npfctl_ + " detach --force " + rxIf() + " >/dev/null 2>&1");
    std::error_code ec;
    std::filesystem::remove_all(pinDir(), ec);
    std::filesystem::remove_all(runDir(), ec);
}

} // namespace npf::test
