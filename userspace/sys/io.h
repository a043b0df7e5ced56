// Positioned whole-buffer I/O (pread/pwrite until done, EINTR retried).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace npf {

// Writes all `len` bytes at `off`: 0, or -errno (-EIO if the file takes none).
inline int pwriteFull(int fd, const void* src, size_t len, uint64_t off) noexcept
{
    auto p = static_cast<const char*>(src);
    while (len) {
        ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n;
        off += static_cast<uint64_t>(n);
        len -= static_cast<size_t>(n);
    }
    return 0;
}

// Reads up to `len` bytes at `off`, stopping early only at end of file:
// the bytes read, or -errno.
inline ssize_t preadUpTo(int fd, void* dst, size_t len, uint64_t off) noexcept
{
    auto p = static_cast<char*>(dst);
    size_t got = 0;
    while (got < len) {
        ssize_t n = ::pread(fd, p + got, len - got, static_cast<off_t>(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(got);
}

} // namespace npf
