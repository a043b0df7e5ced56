#include "region/uffd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/uio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "sys/error.h"

namespace npf {
namespace {

// One ioctl over a range (UFFDIO_COPY, _MOVE, _CONTINUE): len when it did it
// all, else -errno; *done (if given) gets how much it did before it stopped.
template <typename Arg>
long rangeIoctl(int fd, unsigned long request, Arg& arg, __s64 Arg::*did, size_t len, int64_t* done) noexcept
{
    const int rc = ::ioctl(fd, request, &arg);
    const int err = errno;
    if (done)
        *done = arg.*did > 0 ? arg.*did : 0;
    return rc == 0 ? static_cast<long>(len) : -err;
}

int rawUserfaultfd(int flags)
{
    int fd = static_cast<int>(::syscall(SYS_userfaultfd, flags));
    if (fd >= 0 || errno != EPERM)
        return fd;
    // vm.unprivileged_userfaultfd = 0 without CAP_SYS_PTRACE: /dev/userfaultfd
    // grants the same by file permission.
    int dev = ::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
        errno = EPERM;
        return -1;
    }
    fd = ::ioctl(dev, USERFAULTFD_IOC_NEW, flags);
    int saved = errno;
    ::close(dev);
    errno = saved;
    return fd;
}

} // namespace

bool userfaultfdAvailable(std::string* why)
{
    int fd = rawUserfaultfd(O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        if (why) {
            char sysctl = '?';
            if (FILE* f = ::fopen("/proc/sys/vm/unprivileged_userfaultfd", "r")) {
                sysctl = static_cast<char>(::fgetc(f));
                ::fclose(f);
            }
            *why = "userfaultfd(2) failed: " + std::string(std::strerror(err)) +
                   " (vm.unprivileged_userfaultfd=" + sysctl +
                   "; run as root, or grant access to /dev/userfaultfd)";
        }
        return false;
    }
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_MISSING_SHMEM;
    bool ok = ::ioctl(fd, UFFDIO_API, &api) == 0;
    int err = errno;
    ::close(fd);
    if (!ok && why)
        *why = "UFFDIO_API with UFFD_FEATURE_MISSING_SHMEM failed: " + std::string(std::strerror(err));
    return ok;
}

bool userfaultfdHasMove()
{
    // User-mode only: any process may ask (the features are the same).
    Fd probe(rawUserfaultfd(O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    uffdio_api api{};
    api.api = UFFD_API;
    return probe && ::ioctl(probe.get(), UFFDIO_API, &api) == 0 && (api.features & UFFD_FEATURE_MOVE);
}

Userfaultfd Userfaultfd::open(uint64_t wanted, uint64_t optional, const std::string& who, int flags)
{
    Userfaultfd u;
    u.fd_.reset(rawUserfaultfd(O_CLOEXEC | O_NONBLOCK | flags));
    if (!u.fd_)
        throwErrno((flags & UFFD_USER_MODE_ONLY)
                       ? "userfaultfd (user-mode only) for " + who
                       : "userfaultfd for " + who +
                             " (needs CAP_SYS_PTRACE, read and write access to /dev/userfaultfd, or "
                             "vm.unprivileged_userfaultfd=1)");

    // Probe what the kernel offers on a throwaway fd: UFFDIO_API may be
    // called only once per fd.
    uint64_t offered = 0;
    {
        Fd probe(rawUserfaultfd(O_CLOEXEC | O_NONBLOCK | flags));
        uffdio_api api{};
        api.api = UFFD_API;
        if (probe && ::ioctl(probe.get(), UFFDIO_API, &api) == 0)
            offered = api.features;
    }
    uint64_t ask = wanted | (optional & offered);
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = ask;
    if (::ioctl(u.fd_.get(), UFFDIO_API, &api) != 0)
        throwErrno("UFFDIO_API for " + who + " (features 0x" + std::to_string(ask) +
                   ", kernel offers 0x" + std::to_string(offered) + ")");
    u.features_ = ask;
    return u;
}

Userfaultfd Userfaultfd::adopt(Fd fd, const std::string& who)
{
    // Only a real userfaultfd: events read from any other file would be
    // whatever its writer forged (a fork event's fd number, which we close).
    char link[64] = {};
    std::string path = "/proc/self/fd/" + std::to_string(fd.get());
    ssize_t n = fd ? ::readlink(path.c_str(), link, sizeof(link) - 1) : -1;
    if (n < 0)
        throwErrno(fd ? errno : EBADF, "adopt the userfaultfd of " + who);
    if (std::strcmp(link, "anon_inode:[userfaultfd]") != 0)
        throwErrno(EINVAL, "adopt the userfaultfd of " + who + ": fd " + std::to_string(fd.get()) + " is " + link +
                               ", not a userfaultfd");
    int fl = ::fcntl(fd.get(), F_GETFL);
    if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK) != 0)
        throwErrno("make the userfaultfd of " + who + " non-blocking");
    Userfaultfd u;
    u.fd_ = std::move(fd);
    return u;
}

Userfaultfd Userfaultfd::duplicate(const std::string& who) const
{
    Userfaultfd u;
    u.fd_.reset(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!u.fd_)
        throwErrno("duplicate the userfaultfd of " + who);
    u.features_ = features_;
    return u;
}

void Userfaultfd::registerRange(void* addr, size_t len, uint64_t modes, const std::string& who) const
{
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uint64_t>(addr);
    reg.range.len = len;
    reg.mode = modes;
    if (::ioctl(fd_.get(), UFFDIO_REGISTER, &reg) != 0)
        throwErrno("UFFDIO_REGISTER " + who + " (" + std::to_string(len) + " bytes, modes 0x" +
                   std::to_string(modes) + ")");
    if (!(reg.ioctls & (1ull << _UFFDIO_COPY)))
        throwErrno(EOPNOTSUPP, "UFFDIO_REGISTER " + who + ": UFFDIO_COPY not offered on this range");
}

long Userfaultfd::copy(void* dst, const void* src, size_t len, int64_t* copied) const noexcept
{
    uffdio_copy c{};
    c.dst = reinterpret_cast<uint64_t>(dst);
    c.src = reinterpret_cast<uint64_t>(src);
    c.len = len;
    return rangeIoctl(fd_.get(), UFFDIO_COPY, c, &uffdio_copy::copy, len, copied);
}

long Userfaultfd::move(void* dst, void* src, size_t len, int64_t* moved) const noexcept
{
    uffdio_move m{};
    m.dst = reinterpret_cast<uint64_t>(dst);
    m.src = reinterpret_cast<uint64_t>(src);
    m.len = len;
    return rangeIoctl(fd_.get(), UFFDIO_MOVE, m, &uffdio_move::move, len, moved);
}

long Userfaultfd::continueRange(void* addr, size_t len, int64_t* mapped) const noexcept
{
    uffdio_continue c{};
    c.range = {reinterpret_cast<uint64_t>(addr), len};
    return rangeIoctl(fd_.get(), UFFDIO_CONTINUE, c, &uffdio_continue::mapped, len, mapped);
}

int Userfaultfd::wake(void* addr, size_t len) const noexcept
{
    uffdio_range r{reinterpret_cast<uint64_t>(addr), len};
    return ::ioctl(fd_.get(), UFFDIO_WAKE, &r) == 0 ? 0 : -errno;
}

int Userfaultfd::writeProtect(void* addr, size_t len, bool wp, bool wake) const noexcept
{
    uffdio_writeprotect w{};
    w.range.start = reinterpret_cast<uint64_t>(addr);
    w.range.len = len;
    w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : wake ? 0 : UFFDIO_WRITEPROTECT_MODE_DONTWAKE;
    return ::ioctl(fd_.get(), UFFDIO_WRITEPROTECT, &w) == 0 ? 0 : -errno;
}

int Userfaultfd::readEvents(uffd_msg* msgs, int n) const noexcept
{
    // Non-blocking per call, whatever the descriptor's flags: O_NONBLOCK
    // lives in the open file description, which an adopted uffd shares with
    // the client that created it, and a client can clear it at any time (a
    // blocking read() would then hang the pager). RWF_NOWAIT makes this one
    // read return EAGAIN instead. Kernels before userfaultfd's read_iter
    // (2024) refuse the flag: poll() first there, and rely on the flag.
    iovec iov{msgs, sizeof(uffd_msg) * static_cast<size_t>(n)};
    ssize_t r = ::preadv2(fd_.get(), &iov, 1, -1, RWF_NOWAIT);
    if (r < 0 && errno == EOPNOTSUPP) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0)
            return 0;
        r = ::read(fd_.get(), msgs, iov.iov_len);
    }
    if (r < 0)
        return errno == EAGAIN ? 0 : -errno;
    return static_cast<int>(r / static_cast<ssize_t>(sizeof(uffd_msg)));
}

} // namespace npf
