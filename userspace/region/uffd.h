// Move-only userfaultfd handle: creation, API handshake, registration and the
// range ioctls the pager needs. Ioctl wrappers are noexcept and return -errno.
#pragma once

#include <linux/userfaultfd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

#include "sys/fd.h"

// Kernel headers are 6.1; newer bits are defined here when missing.
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
// UFFDIO_MOVE: Linux 6.8.
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#define _UFFDIO_MOVE (0x05)
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
struct uffdio_move {
    __u64 dst;
    __u64 src;
    __u64 len;
    __u64 mode;
    __s64 move;
};
#endif

namespace npf {

// True if this process can create a userfaultfd that also handles faults
// raised by the kernel (not UFFD_USER_MODE_ONLY); otherwise *why says why.
bool userfaultfdAvailable(std::string* why);

// True if the kernel offers UFFDIO_MOVE (Linux 6.8) to this process.
bool userfaultfdHasMove();

class Userfaultfd {
public:
    Userfaultfd() noexcept = default;

    // Opens a non-blocking uffd and negotiates `wanted` features; the ones in
    // `optional` are dropped silently when the kernel lacks them. `flags`:
    // more userfaultfd(2) flags, e.g. UFFD_USER_MODE_ONLY, which an
    // unprivileged process (npfd's client) may always have.
    static Userfaultfd open(uint64_t wanted, uint64_t optional, const std::string& who, int flags = 0);
    // Takes over a userfaultfd another process created, negotiated and
    // registered (npfd's client, through SCM_RIGHTS) and makes it
    // non-blocking (poll() reports POLLERR on a blocking one). Throws if `fd`
    // is not a userfaultfd. features() is 0: the creator negotiated them.
    static Userfaultfd adopt(Fd fd, const std::string& who);
    // Another descriptor of this userfaultfd (the same open file
    // description), for a thread that may outlive this one's owner. Throws
    // naming `who`.
    Userfaultfd duplicate(const std::string& who) const;

    // Registers [addr, addr + len) in `modes` (UFFDIO_REGISTER_MODE_*).
    void registerRange(void* addr, size_t len, uint64_t modes, const std::string& who) const;

    // UFFDIO_COPY of len bytes from src to dst (both page aligned). Returns
    // bytes copied (== len) or -errno; *copied gets the bytes installed
    // before an error (e.g. the page that hit -EEXIST is at *copied).
    long copy(void* dst, const void* src, size_t len, int64_t* copied) const noexcept;
    // UFFDIO_MOVE of len bytes of private anonymous memory from src to dst
    // (both page aligned, both registered with this uffd, dst missing, src
    // present and mapped once), without allocating or copying; wakes
    // dst's waiters. Returns len or -errno; *moved gets the bytes moved
    // before an error (the page that failed is at *moved).
    long move(void* dst, void* src, size_t len, int64_t* moved) const noexcept;
    // UFFDIO_CONTINUE: maps the page cache pages of [addr, addr + len) into
    // the registered range (MINOR mode) and wakes its waiters. Returns len or
    // -errno (-EEXIST: already mapped); *mapped gets the bytes mapped before an error.
    long continueRange(void* addr, size_t len, int64_t* mapped) const noexcept;
    // continueRange of pages in the page cache: true if they are mapped now
    // (by this call, or already: EEXIST); false if not in the page cache.
    bool mapCached(void* addr, size_t len) const noexcept
    {
        const long rc = continueRange(addr, len, nullptr);
        return rc >= 0 || rc == -EEXIST;
    }
    // UFFDIO_WAKE of threads waiting on [addr, addr + len).
    int wake(void* addr, size_t len) const noexcept;
    // UFFDIO_WRITEPROTECT: protect (wp = true) or resolve and wake (wp = false;
    // wake = false resolves without waking).
    int writeProtect(void* addr, size_t len, bool wp, bool wake = true) const noexcept;
    // Reads up to n pending events; 0 when none (non-blocking), or -errno.
    int readEvents(uffd_msg* msgs, int n) const noexcept;

    int fd() const noexcept { return fd_.get(); }
    uint64_t features() const noexcept { return features_; }
    explicit operator bool() const noexcept { return bool(fd_); }

private:
    Fd fd_;
    uint64_t features_ = 0;
};

} // namespace npf
