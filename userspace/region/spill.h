// Where evicted page content is saved: a second memfd (default) or an
// unlinked O_TMPFILE in a directory, written at the page's region offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sys/fd.h"

namespace npf {

class SpillFile {
public:
    SpillFile() noexcept = default;
    // dir empty: memfd named `name`; else O_TMPFILE in dir. Sized to `size` (sparse).
    static SpillFile open(uint64_t size, const std::string& dir, const std::string& name);
    // Adopts a file another process gave (an npfd client keeps its spill, so
    // what npfd evicted survives npfd): a shmem memfd, reopened as our own
    // open file description (see sys/reopen.h), sealed against further
    // seals, grown to `size` if smaller. Throws naming `who` if it is not
    // one, or if it is sealed against writes or growth.
    static SpillFile adopt(Fd fd, uint64_t size, const std::string& who);

    // Full-length pwrite/pread at `off`; 0 or -errno. Holes read as zeros.
    // A file this process opened itself, used as it is: no checks, no
    // reopening (a test's write-only file, on which every load fails).
    static SpillFile own(Fd fd) noexcept;

    int save(uint64_t off, const void* src, size_t len) const noexcept;
    int load(uint64_t off, void* dst, size_t len) const noexcept;
    // Frees the saved content of [off, off + len).
    int drop(uint64_t off, size_t len) const noexcept;

    int fd() const noexcept { return fd_.get(); }

private:
    Fd fd_;
};

} // namespace npf
