// Helpers of the ipc tests (and npfd's config test): descriptors of each kind a client passes,
// open-descriptor counts, a temporary directory.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

#include "sys/error.h"
#include "sys/fd.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

namespace npf::test {

inline Fd makeMemfd(const char* name, off_t size)
{
    Fd f(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!f)
        throwErrno("memfd_create");
    checkErrno(::ftruncate(f.get(), size), "ftruncate memfd");
    return f;
}

inline Fd makeEventfd() { return Fd(checkErrno(::eventfd(0, EFD_CLOEXEC), "eventfd")); }

// UFFD_USER_MODE_ONLY needs no privilege (vm.unprivileged_userfaultfd aside).
inline Fd makeUserfaultfd()
{
    int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    if (fd < 0)
        fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    return Fd(fd);
}

// The errno of the std::system_error f() throws; 0 if it throws nothing.
inline int errnoOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const std::system_error& e) {
        return e.code().value();
    }
    return 0;
}

// Descriptors open in this process now.
inline int openFds()
{
    int n = 0;
    DIR* d = ::opendir("/proc/self/fd");
    if (!d)
        throwErrno("opendir /proc/self/fd");
    while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.')
            ++n;
    ::closedir(d);
    return n - 1; // the directory's own descriptor
}

// Same open file (device and inode)?
inline bool sameFile(int a, int b)
{
    struct stat sa, sb;
    return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A directory under /tmp, mode 0755 (a child that dropped root can enter
// it), removed with its content.
class TempDir {
public:
    TempDir()
    {
        char tmpl[] = "/tmp/npf-sidecar-XXXXXX";
        if (!::mkdtemp(tmpl))
            throwErrno("mkdtemp");
        path_ = tmpl;
        checkErrno(::chmod(tmpl, 0755), "chmod temp dir");
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

} // namespace npf::test
