#include "sys/reopen.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "sys/error.h"

namespace npf {

Fd reopenOwn(int fd, const std::string& what)
{
    struct stat before{}, after{};
    if (fd < 0 || ::fstat(fd, &before) != 0)
        throwErrno(EBADF, "reopen " + what + ": not an open file");
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    Fd own(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_LARGEFILE | O_NOCTTY));
    if (!own)
        throwErrno("reopen " + what + " read-write through " + path +
                   (errno == EACCES ? " (its mode does not let npfd read and write it: keep the memfd's default mode)"
                                    : ""));
    if (::fstat(own.get(), &after) != 0 || after.st_dev != before.st_dev || after.st_ino != before.st_ino)
        throwErrno(EBADF, "reopen " + what + ": " + path + " is not the same file");
    return own;
}

Fd adoptPeerMemfd(int fd, uint64_t minSize, const std::string& what, uint64_t* size)
{
    Fd own = reopenOwn(fd, what);
    const int seals = ::fcntl(own.get(), F_GET_SEALS);
    if (seals < 0)
        throwErrno("F_GET_SEALS on " + what);
    if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
        throwErrno(EPERM, what + " is sealed against writes: npfd writes it");
    if (!(seals & F_SEAL_SEAL)) {
        if (::fcntl(own.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
            throwErrno("seal " + what + " against shrinking");
    } else if (!(seals & F_SEAL_SHRINK)) {
        throwErrno(EPERM, what + " cannot be sealed against shrinking: create it with MFD_ALLOW_SEALING (a "
                                 "shrunk memfd would SIGBUS the daemon)");
    }
    struct stat st{};
    if (::fstat(own.get(), &st) != 0)
        throwErrno("fstat " + what);
    if (static_cast<uint64_t>(st.st_size) < minSize)
        throwErrno(EINVAL, what + " holds " + std::to_string(st.st_size) + " bytes, less than the " +
                               std::to_string(minSize) + " it must: refused");
    if (size)
        *size = static_cast<uint64_t>(st.st_size);
    return own;
}

} // namespace npf
