#include "region/spill.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sys/error.h"

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
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        throwErrno(EBADF, who + ": the spill descriptor is not a regular file or memfd");
    if (static_cast<uint64_t>(st.st_size) < size && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
        throwErrno(who + ": size the spill file to " + std::to_string(size) + " bytes");
    SpillFile s;
    s.fd_ = std::move(fd);
    return s;
}

int SpillFile::save(uint64_t off, const void* src, size_t len) const noexcept
{
    auto p = static_cast<const char*>(src);
    while (len) {
        ssize_t n = ::pwrite(fd_.get(), p, len, static_cast<off_t>(off));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        p += n;
        off += static_cast<uint64_t>(n);
        len -= static_cast<size_t>(n);
    }
    return 0;
}

int SpillFile::load(uint64_t off, void* dst, size_t len) const noexcept
{
    auto p = static_cast<char*>(dst);
    while (len) {
        ssize_t n = ::pread(fd_.get(), p, len, static_cast<off_t>(off));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0) { // past EOF: never saved
            std::memset(p, 0, len);
            return 0;
        }
        p += n;
        off += static_cast<uint64_t>(n);
        len -= static_cast<size_t>(n);
    }
    return 0;
}

int SpillFile::drop(uint64_t off, size_t len) const noexcept
{
    int rc = ::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                         static_cast<off_t>(len));
    return rc == 0 ? 0 : -errno;
}

} // namespace npf
