#include "region/spill.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sys/error.h"
#include "sys/io.h"
#include "sys/reopen.h"

namespace npf {

SpillFile SpillFile::open(uint64_t size, const std::string& dir, const std::string& name)
{
    SpillFile s;
    std::string what;
    if (dir.empty()) {
        what = "spill memfd " + name;
        s.fd_.reset(::memfd_create(name.c_str(), MFD_CLOEXEC));
    } else {
        what = "spill tmpfile in " + dir;
        s.fd_.reset(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    }
    if (!s.fd_)
        throwErrno("create " + what);
    if (::ftruncate(s.fd_.get(), static_cast<off_t>(size)) != 0)
        throwErrno("size " + what + " to " + std::to_string(size) + " bytes");
    return s;
}

SpillFile SpillFile::adopt(Fd fd, uint64_t size, const std::string& who)
{
    struct stat st{};
    struct statfs fs{};
    // A shmem memfd only: a file on another file system (FUSE, NFS) could
    // make our writes wait as long as its owner likes.
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || ::fstatfs(fd.get(), &fs) != 0 ||
        fs.f_type != TMPFS_MAGIC || ::fcntl(fd.get(), F_GET_SEALS) < 0)
        throwErrno(EBADF, who + ": the spill descriptor is not a shmem memfd");
    // Our own open file description (the owner may set O_APPEND on its copy:
    // our pwrite()s would append, growing the file without bound).
    fd = reopenOwn(fd.get(), who + "'s spill memfd");
    const int seals = ::fcntl(fd.get(), F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE | F_SEAL_GROW)))
        throwErrno(EPERM, who + ": the spill memfd is sealed against writes or growth");
    // No seal may come later (F_SEAL_WRITE would fail every save).
    if (!(seals & F_SEAL_SEAL) && ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SEAL) != 0)
        throwErrno(who + ": seal the spill memfd against further seals");
    if (static_cast<uint64_t>(st.st_size) < size && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
        throwErrno(who + ": size the spill file to " + std::to_string(size) + " bytes");
    SpillFile s;
    s.fd_ = std::move(fd);
    return s;
}

SpillFile SpillFile::own(Fd fd) noexcept
{
    SpillFile s;
    s.fd_ = std::move(fd);
    return s;
}

int SpillFile::save(uint64_t off, const void* src, size_t len) const noexcept
{
    return pwriteFull(fd_.get(), src, len, off);
}

int SpillFile::load(uint64_t off, void* dst, size_t len) const noexcept
{
    const ssize_t n = preadUpTo(fd_.get(), dst, len, off);
    if (n < 0)
        return static_cast<int>(n);
    std::memset(static_cast<char*>(dst) + n, 0, len - static_cast<size_t>(n)); // past EOF: never saved
    return 0;
}

int SpillFile::drop(uint64_t off, size_t len) const noexcept
{
    int rc = ::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                         static_cast<off_t>(len));
    return rc == 0 ? 0 : -errno;
}

} // namespace npf
