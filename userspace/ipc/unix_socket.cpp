#include "ipc/unix_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "sys/error.h"

namespace npf::ipc {
namespace {

// SO_NETNS_COOKIE (Linux 5.14); Debian 12's libc headers predate it.
constexpr int kSoNetnsCookie = 71;

struct UnixAddress {
    sockaddr_un addr{};
    socklen_t len = 0;
};

// A path, or "@NAME": NAME in the abstract namespace of the caller's
// network namespace (no file; the address ends at its length, no NUL).
UnixAddress unixAddress(const std::string& path)
{
    UnixAddress a;
    a.addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof(a.addr.sun_path) || path == "@")
        throw Error(ENAMETOOLONG, "socket path '" + path + "': must be 1.." +
                                      std::to_string(sizeof(a.addr.sun_path) - 1) + " bytes long (@NAME: 1.." +
                                      std::to_string(sizeof(a.addr.sun_path) - 2) + ")");
    if (isAbstract(path)) {
        std::memcpy(a.addr.sun_path + 1, path.data() + 1, path.size() - 1);
        a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    } else {
        std::memcpy(a.addr.sun_path, path.data(), path.size());
        a.len = sizeof(a.addr);
    }
    return a;
}

// connect() on a fresh SOCK_SEQPACKET socket; 0 or -errno.
int tryConnect(const std::string& path, bool nonBlocking, Fd* out)
{
    const UnixAddress a = unixAddress(path);
    Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonBlocking ? SOCK_NONBLOCK : 0), 0));
    if (!s)
        throwErrno("socket(AF_UNIX, SOCK_SEQPACKET) for " + path);
    int rc;
    do
        rc = ::connect(s.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len);
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return -errno;
    if (out)
        *out = std::move(s);
    return 0;
}

// mkdir -p with every directory it creates set to 0755 (whatever the umask).
void makeParents(const std::filesystem::path& dir)
{
    if (dir.empty())
        return;
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            throw Error(ENOTDIR, "socket directory " + dir.string() + " exists and is not a directory");
        return;
    }
    if (errno != ENOENT)
        throwErrno("stat socket directory " + dir.string());
    makeParents(dir.parent_path() == dir ? std::filesystem::path() : dir.parent_path());
    if (::mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST)
        throwErrno("create socket directory " + dir.string());
    checkErrno(::chmod(dir.c_str(), 0755), "chmod 0755 " + dir.string());
}

gid_t lookupGroup(const std::string& group, const std::string& path)
{
    gid_t gid = 0;
    const char* end = group.data() + group.size();
    auto [p, ec] = std::from_chars(group.data(), end, gid);
    if (ec == std::errc() && p == end)
        return gid;
    std::vector<char> buf(16384);
    struct group gr, *found = nullptr;
    int err = ::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found);
    if (err != 0)
        throwErrno(err, "look up group '" + group + "' for " + path);
    if (!found)
        throw Error(ENOENT, "socket group '" + group + "' for " + path + ": no such group");
    return gr.gr_gid;
}

// Refuses to take `path` over from a live listener; removes a stale socket.
void clearStale(const std::string& path)
{
    struct stat st;
    if (::lstat(path.c_str(), &st) < 0) {
        if (errno == ENOENT)
            return;
        throwErrno("stat " + path);
    }
    if (!S_ISSOCK(st.st_mode))
        throw Error(EEXIST, path + " exists and is not a socket: remove it or choose another socket path");
    int rc = tryConnect(path, true, nullptr);
    if (rc == 0 || rc == -EAGAIN || rc == -EPROTOTYPE)
        throw Error(EADDRINUSE, "another process (npfd?) is listening on " + path +
                                    ": stop it first, or choose another socket path");
    if (rc != -ECONNREFUSED && rc != -ENOENT)
        throwErrno(-rc, "probe existing socket " + path);
    if (::unlink(path.c_str()) < 0 && errno != ENOENT)
        throwErrno("remove stale socket " + path);
}

std::string fdLink(int fd)
{
    char link[64], target[256];
    std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, target, sizeof(target));
    if (n <= 0 || static_cast<size_t>(n) >= sizeof(target))
        return {};
    return std::string(target, static_cast<size_t>(n));
}

// One message of one buffer, with room for kMaxFds descriptors of control data.
struct MessageHeader {
    explicit MessageHeader(iovec* iov)
    {
        msg.msg_iov = iov;
        msg.msg_iovlen = 1;
    }
    msghdr msg{};
    union {
        cmsghdr align;
        char buf[CMSG_SPACE(kMaxFds * sizeof(int))];
    } control{};
};

} // namespace

Listener::Listener(Fd fd, std::string path) noexcept : fd_(std::move(fd)), path_(std::move(path))
{
    struct stat st;
    if (::stat(path_.c_str(), &st) == 0) {
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
}

Listener::Listener(Listener&& o) noexcept
    : fd_(std::move(o.fd_)), path_(std::move(o.path_)), dev_(o.dev_), ino_(o.ino_)
{
    o.path_.clear();
}

Listener& Listener::operator=(Listener&& o) noexcept
{
    if (this != &o) {
        unlinkIfOurs();
        fd_ = std::move(o.fd_);
        path_ = std::move(o.path_);
        dev_ = o.dev_;
        ino_ = o.ino_;
        o.path_.clear();
    }
    return *this;
}

Listener::~Listener() { unlinkIfOurs(); }

void Listener::unlinkIfOurs() noexcept
{
    struct stat st;
    if (fd_ && !path_.empty() && ::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
        st.st_dev == dev_ && st.st_ino == ino_)
        ::unlink(path_.c_str());
    fd_.reset();
    path_.clear();
}

std::string Listener::lost() const
{
    struct stat st;
    if (::lstat(path_.c_str(), &st) != 0)
        return "the socket " + path_ + " is gone (" + std::strerror(errno) + "): clients cannot connect";
    if (!S_ISSOCK(st.st_mode) || st.st_dev != dev_ || st.st_ino != ino_)
        return path_ + " is no longer npfd's socket (replaced): clients cannot reach npfd";
    return "";
}

Fd Listener::accept() { return acceptOn(fd_.get(), path_); }

Fd acceptOn(int fd, const std::string& what)
{
    for (;;) {
        int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c >= 0)
            return Fd(c);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
            return Fd();
        throwErrno("accept on " + what);
    }
}

bool isSeqpacketListener(int fd) noexcept
{
    int domain = 0, type = 0, listening = 0;
    socklen_t len = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX)
        return false;
    len = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET)
        return false;
    len = sizeof(int);
    return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening == 1;
}

Listener listenSocket(const std::string& path, mode_t mode, const std::string& group, int backlog)
{
    if (isAbstract(path))
        throw Error(EINVAL, "socket path '" + path + "': npfd listens on a file (an abstract name has no "
                            "mode or group to keep clients out)");
    const UnixAddress ua = unixAddress(path);
    const sockaddr_un& a = ua.addr;
    makeParents(std::filesystem::path(path).parent_path());
    clearStale(path);

    Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s)
        throwErrno("socket(AF_UNIX, SOCK_SEQPACKET) for " + path);
    if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) < 0) {
        if (errno == EADDRINUSE)
            throw Error(EADDRINUSE, "bind " + path + ": another process took the path meanwhile");
        throwErrno("bind " + path);
    }
    // From here on the path is ours: a Listener removes it if anything fails.
    // Connections are refused until listen(), so mode and group are in place
    // before the first client can connect.
    Listener l(std::move(s), path);
    checkErrno(::chmod(path.c_str(), mode), "chmod " + path);
    if (!group.empty()) {
        gid_t gid = lookupGroup(group, path);
        checkErrno(::chown(path.c_str(), static_cast<uid_t>(-1), gid),
                   "chown " + path + " to group " + group);
    }
    checkErrno(::listen(l.fd(), backlog), "listen on " + path);
    return l;
}

Fd listenAbstract(const std::string& name, int backlog)
{
    if (!isAbstract(name))
        throw Error(EINVAL, "'" + name + "' is not an abstract socket name (@NAME)");
    const UnixAddress a = unixAddress(name);
    Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s)
        throwErrno("socket(AF_UNIX, SOCK_SEQPACKET) for " + name);
    if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) < 0) {
        if (errno == EADDRINUSE)
            throw Error(EADDRINUSE, "bind " + name + ": a socket of that name exists in this network namespace");
        throwErrno("bind " + name);
    }
    checkErrno(::listen(s.get(), backlog), "listen on " + name);
    return s;
}

Fd connectSocket(const std::string& path)
{
    Fd s;
    int rc = tryConnect(path, false, &s);
    switch (-rc) {
    case 0:
        return s;
    case ENOENT:
        throw Error(ENOENT, "npfd is not running? no socket at " + path);
    case ECONNREFUSED:
        if (isAbstract(path))
            throw Error(ECONNREFUSED, "nothing listens on " + path + " in this network namespace: npfd is not "
                                      "running, or npf-cni gave this pod no listener");
        throw Error(ECONNREFUSED, "npfd is not running? " + path + " refuses connections (a stale socket)");
    case EACCES:
    case EPERM:
        throw Error(-rc, "no permission to connect to " + path +
                             ": be a member of the socket's group (ls -l " + path + ")");
    default:
        throwErrno(-rc, "connect to npfd at " + path);
    }
}

bool isAbstract(std::string_view path) noexcept { return path.starts_with('@'); }

void socketPair(Fd& a, Fd& b)
{
    int sv[2];
    checkErrno(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair(SOCK_SEQPACKET)");
    a.reset(sv[0]);
    b.reset(sv[1]);
}

void setNonBlocking(int fd, bool on)
{
    int flags = checkErrno(::fcntl(fd, F_GETFL), "fcntl(F_GETFL) on fd " + std::to_string(fd));
    int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
    if (want != flags)
        checkErrno(::fcntl(fd, F_SETFL, want), "fcntl(F_SETFL) on fd " + std::to_string(fd));
}

IoStatus sendMessage(int fd, std::string_view bytes, std::span<const int> fds)
{
    if (bytes.empty())
        throw Error(EINVAL, "send on socket fd " + std::to_string(fd) + ": empty message");
    if (bytes.size() > kMaxMessage)
        throw Error(EMSGSIZE, "send on socket fd " + std::to_string(fd) + ": message of " +
                                  std::to_string(bytes.size()) + " bytes, at most " +
                                  std::to_string(kMaxMessage));
    if (fds.size() > kMaxFds)
        throw Error(ETOOMANYREFS, "send on socket fd " + std::to_string(fd) + ": " +
                                      std::to_string(fds.size()) + " descriptors, at most " +
                                      std::to_string(kMaxFds));

    iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
    MessageHeader h(&iov);
    msghdr& msg = h.msg;
    auto& control = h.control;
    if (!fds.empty()) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    for (;;) {
        ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n >= 0) {
            if (static_cast<size_t>(n) != bytes.size())
                throw Error(EIO, "send on socket fd " + std::to_string(fd) + ": short send");
            return IoStatus::Ok;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return IoStatus::WouldBlock;
        if (errno == EPIPE || errno == ECONNRESET)
            return IoStatus::Eof;
        throwErrno("send a message with " + std::to_string(fds.size()) + " descriptors on socket fd " +
                   std::to_string(fd));
    }
}

RecvResult recvMessage(int fd)
{
    RecvResult r;
    std::string& bytes = r.message.bytes;
    bytes.resize(kMaxMessage);
    iovec iov{bytes.data(), bytes.size()};
    MessageHeader h(&iov);
    msghdr& msg = h.msg;
    auto& control = h.control;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);

    ssize_t n;
    do
        n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            r.status = IoStatus::WouldBlock;
            bytes.clear();
            return r;
        }
        if (errno == ECONNRESET) { // the peer closed with our messages unread
            r.status = IoStatus::Eof;
            bytes.clear();
            return r;
        }
        throwErrno("receive on socket fd " + std::to_string(fd));
    }
    // Own every descriptor that arrived first, so each error below closes them.
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            r.message.fds.emplace_back(f);
        }
    }
    bytes.resize(static_cast<size_t>(n));
    const std::string where = "receive on socket fd " + std::to_string(fd) + ": ";
    if (msg.msg_flags & MSG_TRUNC)
        throw Error(EMSGSIZE, where + "oversized message (more than " + std::to_string(kMaxMessage) +
                                  " bytes), discarded");
    if (msg.msg_flags & MSG_CTRUNC) {
        // The kernel installs what fits: all kMaxFds when the sender passed
        // more, fewer when this process ran out of descriptors.
        if (r.message.fds.size() < kMaxFds)
            throw Error(EMFILE, where + "descriptors lost (out of descriptors? RLIMIT_NOFILE), message discarded");
        throw Error(ETOOMANYREFS, where + "more than " + std::to_string(kMaxFds) +
                                      " descriptors in one message, message discarded");
    }
    if (n == 0) {
        r.status = IoStatus::Eof;
        r.message.fds.clear();
        return r;
    }
    return r;
}

PeerCred peerCred(int fd)
{
    ucred c{};
    socklen_t len = sizeof(c);
    checkErrno(::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len),
               "SO_PEERCRED on socket fd " + std::to_string(fd));
    return {c.pid, c.uid, c.gid};
}

uint64_t peerNetns(int fd)
{
    uint64_t cookie = 0;
    socklen_t len = sizeof(cookie);
    checkErrno(::getsockopt(fd, SOL_SOCKET, kSoNetnsCookie, &cookie, &len),
               "SO_NETNS_COOKIE on socket fd " + std::to_string(fd));
    return cookie;
}

uint64_t currentNetns()
{
    const Fd s(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s)
        throwErrno("socket(AF_UNIX) for the network namespace's cookie");
    return peerNetns(s.get());
}

std::string peerCgroup(pid_t pid)
{
    const std::string path = "/proc/" + std::to_string(pid) + "/cgroup";
    Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f) {
        if (errno == ENOENT)
            throw Error(ESRCH, "read " + path + ": process " + std::to_string(pid) + " is gone");
        throwErrno("read " + path);
    }
    std::string text;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(f.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (errno == ESRCH)
                throw Error(ESRCH, "read " + path + ": process " + std::to_string(pid) + " is gone");
            throwErrno("read " + path);
        }
        if (n == 0)
            break;
        text.append(buf, static_cast<size_t>(n));
    }
    size_t pos = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos)
            eol = text.size();
        std::string_view line(text.data() + pos, eol - pos);
        if (line.starts_with("0::"))
            return std::string(line.substr(3));
        pos = eol + 1;
    }
    return {};
}

bool isMemfd(int fd) noexcept
{
    // F_GET_SEALS answers for memfds only (shmem or hugetlbfs), sealable or
    // not; a path is no evidence (any file system can have a "/memfd:x").
    struct stat st;
    struct statfs fs;
    if (fd < 0 || ::fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || ::fstatfs(fd, &fs) < 0)
        return false;
    return (fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC) && ::fcntl(fd, F_GET_SEALS) >= 0;
}

bool isUserfaultfd(int fd) noexcept
{
    return fd >= 0 && fdLink(fd) == "anon_inode:[userfaultfd]";
}

bool isEventfd(int fd) noexcept
{
    return fd >= 0 && fdLink(fd) == "anon_inode:[eventfd]";
}

uint64_t fdSize(int fd)
{
    struct stat st;
    checkErrno(::fstat(fd, &st), "fstat fd " + std::to_string(fd));
    return static_cast<uint64_t>(st.st_size);
}

} // namespace npf::ipc
