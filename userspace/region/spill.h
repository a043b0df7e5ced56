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
    // what npfd evicted survives npfd): a regular file or memfd, grown to
    // `size` if smaller. Throws naming `who` if it is not one.
    static SpillFile adopt(Fd fd, uint64_t size, const std::string& who);

    // Full-length pwrite/pread at `off`; 0 or -errno. Holes read as zeros.
    int save(uint64_t off, const void* src, size_t len) const noexcept;
    int load(uint64_t off, void* dst, size_t len) const noexcept;
    // Frees the saved content of [off, off + len).
    int drop(uint64_t off, size_t len) const noexcept;

    int fd() const noexcept { return fd_.get(); }

private:
    Fd fd_;
};

} // namespace npf
