// An open file description of our own for a file another process handed us.
#pragma once

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

} // namespace npf
