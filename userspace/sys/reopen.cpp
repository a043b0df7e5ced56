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

} // namespace npf
