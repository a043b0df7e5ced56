#include "dataplane/pins.h"

#include <dirent.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "npf/abi.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf::dataplane {

bool isBpffs(const std::string& path)
{
    struct statfs st {};
    return ::statfs(path.c_str(), &st) == 0 && static_cast<unsigned long>(st.f_type) == BPF_FS_MAGIC;
}

void ensureBpffs()
{
    if (isBpffs(kBpffsPath))
        return;
    if (::mount("bpf", kBpffsPath, "bpf", 0, "mode=0700") != 0) {
        int err = errno;
        throw Error(err, std::string("bpffs is not mounted at ") + kBpffsPath + " and mounting it failed: " +
                             std::strerror(err) + " (run as root, or mount it: mount -t bpf bpf " + kBpffsPath +
                             ")");
    }
    NPF_INFO("mounted bpffs at %s", kBpffsPath);
}

std::string netnsDir()
{
    struct stat st {};
    if (::stat("/proc/thread-self/ns/net", &st) != 0)
        throwErrno("stat /proc/thread-self/ns/net");
    return std::string(NPF_PIN_ROOT) + "/netns-" + std::to_string(st.st_ino);
}

std::string pinDir(const std::string& ifname) { return netnsDir() + "/" + ifname; }

std::string pinPath(const std::string& ifname, const char* map) { return pinDir(ifname) + "/" + map; }

std::string ringPinPath(const std::string& pinDir, uint32_t id) { return pinDir + "/ring-" + std::to_string(id); }

bool pinDirExists(const std::string& ifname)
{
    struct stat st {};
    return ::stat(pinDir(ifname).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void makePinDir(const std::string& ifname)
{
    const std::string dir = pinDir(ifname);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        throw std::system_error(ec, "create pin directory " + dir);
    // Only root may look inside, whatever the umask gave the new directories
    // (bpffs itself is often 1777).
    std::filesystem::permissions(NPF_PIN_ROOT, std::filesystem::perms::owner_all, ec);
    if (ec)
        throw std::system_error(ec, std::string("restrict ") + NPF_PIN_ROOT + " to its owner");
}

namespace {
struct CloseDir {
    void operator()(DIR* d) const noexcept { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, CloseDir>;
} // namespace

bool removePinDir(const std::string& ifname)
{
    std::string dir = pinDir(ifname);
    DirPtr d(::opendir(dir.c_str()));
    if (!d) {
        if (errno == ENOENT)
            return false;
        throwErrno("open pin directory " + dir);
    }
    while (dirent* e = ::readdir(d.get())) {
        std::string name = e->d_name;
        if (name == "." || name == "..")
            continue;
        std::string path = dir + "/" + name;
        if (::unlink(path.c_str()) != 0 && errno != ENOENT)
            throwErrno("remove pin " + path);
    }
    d.reset();
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
        throwErrno("remove pin directory " + dir);
    (void)::rmdir(netnsDir().c_str()); // once its last instance is gone
    return true;
}

std::vector<std::string> pinnedInterfaces()
{
    std::vector<std::string> names;
    const std::string root = netnsDir();
    DirPtr d(::opendir(root.c_str()));
    if (!d) {
        if (errno == ENOENT)
            return names;
        throwErrno("list " + root);
    }
    while (dirent* e = ::readdir(d.get())) {
        std::string name = e->d_name;
        if (name != "." && name != ".." && pinDirExists(name))
            names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

} // namespace npf::dataplane
