// An open file description of our own for a file another process handed us.
#pragma once

#include <cstdint>
#include <string>

#include "sys/fd.h"

namespace npf {

// Opens the file `fd` refers to afresh (through /proc/self/fd), read-write:
// a new open file description of the same inode. File status flags
// (O_APPEND, O_NONBLOCK, O_DIRECT) live in the description, so a peer that
// changes them on its own copy after handing the file over changes nothing
// for us; size, seals and content stay shared (they are the inode's).
// Throws naming `what` when the file cannot be reopened (the peer removed
// read-write permission, /proc is not mounted) or the reopened file is not
// the same inode.
Fd reopenOwn(int fd, const std::string& what);

// A memfd another process handed us, to map and write for as long as we
// keep it: our own description of it (reopenOwn), sealed against shrinking
// (a peer that shrank it would SIGBUS us; it must have been created with
// MFD_ALLOW_SEALING) and against writes never (we write it), of at least
// minSize bytes (read after the seal, so it stays so; *size gets it).
// Throws naming `what`.
Fd adoptPeerMemfd(int fd, uint64_t minSize, const std::string& what, uint64_t* size = nullptr);

} // namespace npf
