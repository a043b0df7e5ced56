// npfd's transport to its clients: SOCK_SEQPACKET Unix sockets (one message per
// record, never merged or split), descriptors passed with SCM_RIGHTS, the
// peer's credentials, and the descriptor type checks npfd applies to what a
// client sends. docs/protocol.md describes the protocol on top.
//
// Errors: setup (listen, connect, peerCred, ...) throws std::system_error
// naming the path or descriptor. sendMessage/recvMessage return the two
// outcomes an epoll loop expects, end of stream and EAGAIN, as values, and
// throw only for a real error.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sys/fd.h"

namespace npf::ipc {

// Largest message, in bytes (a larger one is discarded by the receiver).
inline constexpr size_t kMaxMessage = 65536;
// Most descriptors one message may carry.
inline constexpr size_t kMaxFds = 4;

// A listening socket that removes its path when destroyed, if the path is
// still the socket it bound (not one a later daemon put there).
class Listener {
public:
    Listener() noexcept = default;
    Listener(Fd fd, std::string path) noexcept;
    Listener(Listener&& o) noexcept;
    Listener& operator=(Listener&& o) noexcept;
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;
    ~Listener();

    int fd() const noexcept { return fd_.get(); }
    const std::string& path() const noexcept { return path_; }
    explicit operator bool() const noexcept { return bool(fd_); }

    // The next pending connection, SOCK_CLOEXEC | SOCK_NONBLOCK; an empty Fd
    // when none is pending (the listening socket is non-blocking) or the
    // client gave up before it was accepted. Throws on other errors (EMFILE).
    Fd accept();
    // "" while the path still names this listener's socket; else why clients
    // cannot reach it any more (the file removed, or replaced). Any thread.
    std::string lost() const;

private:
    void unlinkIfOurs() noexcept;

    Fd fd_;
    std::string path_;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

// Listens on `path` (SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK): creates
// missing parent directories (0755), replaces a stale socket file, binds,
// sets `mode` and, if `group` is not empty, the group (a name or a decimal
// gid), then listens. Refuses if a live process accepts connections on
// `path` (another npfd) or if `path` exists and is not a socket. No client can
// connect before the mode and group are set.
Listener listenSocket(const std::string& path, mode_t mode = 0660, const std::string& group = "",
                      int backlog = 64);

// "@NAME": a name in the abstract namespace of the caller's network
// namespace, not a file (a pod's listener, npf-cni). Every function that
// takes a socket path accepts it, except listenSocket.
bool isAbstract(std::string_view path) noexcept;

// Listens on the abstract name `name` ("@NAME", SOCK_SEQPACKET |
// SOCK_CLOEXEC | SOCK_NONBLOCK) in the caller's network namespace. Throws
// EADDRINUSE naming it when the name is taken.
Fd listenAbstract(const std::string& name, int backlog = 64);

// Connects to the daemon at `path` (blocking, SOCK_CLOEXEC). A missing
// socket or a refused connection throw ENOENT / ECONNREFUSED with "npfd is
// not running? ..." and the path; EACCES says to check the socket's group.
Fd connectSocket(const std::string& path);

// A connected SOCK_SEQPACKET pair (SOCK_CLOEXEC), for tests and in-process use.
void socketPair(Fd& a, Fd& b);

// Sets or clears O_NONBLOCK.
void setNonBlocking(int fd, bool on);

enum class IoStatus {
    Ok,         // one whole message was sent / received
    Eof,        // the peer closed the connection (recv: 0 bytes; send: EPIPE, ECONNRESET)
    WouldBlock, // non-blocking socket: nothing to receive / no room to send now (EAGAIN)
};

// One received message and the descriptors that came with it, in the order
// the sender passed them. The receiver owns them (close-on-exec).
struct WireMessage {
    std::string bytes;
    std::vector<Fd> fds;
};

struct RecvResult {
    IoStatus status = IoStatus::Ok;
    WireMessage message; // filled when status == Ok
};

// Sends one message of 1..kMaxMessage bytes with up to kMaxFds descriptors
// (SCM_RIGHTS, MSG_NOSIGNAL; EINTR retried). The caller keeps its own
// descriptors. Throws EINVAL for an empty message, EMSGSIZE above
// kMaxMessage, ETOOMANYREFS above kMaxFds, and any other send error.
IoStatus sendMessage(int fd, std::string_view bytes, std::span<const int> fds = {});

// Receives one message (MSG_CMSG_CLOEXEC; EINTR retried). A message that
// cannot be delivered whole is consumed and its descriptors are closed, and
// the connection stays usable: more than kMaxMessage bytes throws EMSGSIZE
// ("oversized"), more than kMaxFds descriptors throws ETOOMANYREFS,
// descriptors lost because this process has no room for them throws EMFILE.
// Other receive errors throw with their errno. 0 bytes is end of stream (Eof).
RecvResult recvMessage(int fd);

// The connected peer's credentials at connect() time (SO_PEERCRED).
struct PeerCred {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
};
PeerCred peerCred(int fd);

// The cgroup v2 path of `pid` ("/user.slice/..."), from the "0::" line of
// /proc/PID/cgroup; "" if the process is in no v2 hierarchy. Throws if the
// file cannot be read (ESRCH: the process is gone). pid comes from
// peerCred(): read it right after accept, while the client waits for its
// hello reply, since a pid can be reused once its process exits.
std::string peerCgroup(pid_t pid);

// The network namespace of the peer on the connected socket `fd`, as a
// cookie (SO_NETNS_COOKIE, Linux 5.14): the kernel creates the accepted end
// of a Unix socket connection in the connecting socket's namespace, so this
// is the namespace the client connected from -- no /proc lookup, nothing a
// client in another PID namespace hides or a reused pid confuses.
uint64_t peerNetns(int fd);
// The cookie of the calling thread's network namespace (a socket made there).
uint64_t currentNetns();

// Descriptor type checks for what a client passes; false for a closed fd.
// memfd: a regular file of shmem or hugetlbfs that answers F_GET_SEALS.
bool isMemfd(int fd) noexcept;
// anon_inode:[userfaultfd]
bool isUserfaultfd(int fd) noexcept;
// anon_inode:[eventfd]
bool isEventfd(int fd) noexcept;
// A listening AF_UNIX SOCK_SEQPACKET socket (what npf-cni hands npfd).
bool isSeqpacketListener(int fd) noexcept;
// The next pending connection on the listening socket `fd` (as
// Listener::accept; `what` names it in errors).
Fd acceptOn(int fd, const std::string& what);
// st_size of the file behind fd; throws if fstat fails.
uint64_t fdSize(int fd);

} // namespace npf::ipc
