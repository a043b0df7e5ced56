#include "client_process.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "region_fixture.h"

namespace npf::test {
namespace {

constexpr int kMaxFds = 4;
constexpr int kCallTimeoutMs = 20000; // generous: a call waits on the parent's pager
constexpr uint64_t kMaxRead = 64 * 1024;

enum Op : uint32_t { kRead = 1, kWrite, kFill, kPunch, kTouch, kWriteLoop, kStop, kTouchOutside };

struct Cmd {
    uint32_t op, arg;
    uint64_t off, len;
};

// The client's first message; fds: memfd, uffd.
struct Hello {
    int32_t err;         // errno of the step that failed, 0 when set up
    int32_t step;        // which step failed
    uint64_t base;       // its mapping of the region
    uint64_t outside;    // a page registered on the same uffd, outside the region
};

const char* const kSteps[] = {"", "setuid(65534)", "memfd_create", "ftruncate", "mmap", "userfaultfd",
                              "UFFDIO_API", "UFFDIO_REGISTER the region", "UFFDIO_REGISTER the outside page",
                              "send"};

uint64_t nowNs()
{
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void sendAll(int sock, const void* p, size_t n)
{
    if (::send(sock, p, n, MSG_NOSIGNAL) < 0)
        ::_exit(3);
}

// The client. Its uffd is user-mode only: the kernel faults of a syscall on
// a missing page would fail with EFAULT, so every access to the mapping is a
// plain load or store, and what it sends is copied out first.
[[noreturn]] void clientMain(int sock, const ClientSpec& spec, pid_t parent)
{
    Hello h{};
    auto fail = [&](int step) {
        h.err = errno ? errno : EIO;
        h.step = step;
        sendAll(sock, &h, sizeof(h));
        ::_exit(1);
    };
    if (spec.dropPrivileges && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
        fail(1);
    // After setuid: a credential change clears the parent-death signal.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
        ::_exit(1);
    int memfd = ::memfd_create("npf-test-client", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0)
        fail(2);
    if (::ftruncate(memfd, static_cast<off_t>(spec.memfdSize ? spec.memfdSize : spec.size)) != 0)
        fail(3);
    void* m = ::mmap(nullptr, spec.size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    void* outside = ::mmap(nullptr, kPg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || outside == MAP_FAILED)
        fail(4);
    auto* base = static_cast<uint8_t*>(m);
    // Blocking on purpose: the region must make it non-blocking.
    int uffd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
    if (uffd < 0)
        fail(5);
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_MISSING_SHMEM | (spec.writeProtect ? UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0);
    if (::ioctl(uffd, UFFDIO_API, &api) != 0)
        fail(6);
    uffdio_register reg{};
    if (spec.registerRegion) {
        reg.range = {reinterpret_cast<uint64_t>(base), spec.size};
        reg.mode = UFFDIO_REGISTER_MODE_MISSING | (spec.writeProtect ? UFFDIO_REGISTER_MODE_WP : 0);
        if (::ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
            fail(7);
    }
    reg = {};
    reg.range = {reinterpret_cast<uint64_t>(outside), kPg};
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (::ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
        fail(8);
    h.base = reinterpret_cast<uint64_t>(base);
    h.outside = reinterpret_cast<uint64_t>(outside);
    int fds[] = {memfd, uffd};
    if (sendWithFds(sock, &h, sizeof(h), fds) != 0)
        fail(9);
    // The daemon now holds the only reference to the uffd: should it die,
    // the mapping is unregistered and no fault of ours waits forever.
    ::close(uffd);

    std::vector<uint8_t> buf(kMaxRead);
    std::vector<uint32_t> lat;
    for (;;) {
        Cmd c{};
        ssize_t n = ::recv(sock, &c, sizeof(c), 0);
        if (n != sizeof(c))
            ::_exit(0);
        uint64_t ack = 0;
        switch (c.op) {
        case kRead:
            std::memcpy(buf.data(), base + c.off, c.len);
            sendAll(sock, buf.data(), c.len);
            continue;
        case kWrite:
            std::memset(base + c.off, static_cast<int>(c.arg), c.len);
            break;
        case kFill: {
            auto bytes = randomBytes(c.len, c.arg);
            std::memcpy(base + c.off, bytes.data(), c.len);
            break;
        }
        case kPunch:
            ack = ::fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(c.off),
                              static_cast<off_t>(c.len)) == 0
                      ? 0
                      : uint64_t(errno);
            break;
        case kTouch:
            lat.clear();
            for (uint64_t off = c.off; off < c.off + c.len; off += kPg) {
                uint64_t t0 = nowNs();
                (void)*reinterpret_cast<volatile uint8_t*>(base + off);
                lat.push_back(static_cast<uint32_t>(nowNs() - t0));
            }
            sendAll(sock, lat.data(), lat.size() * sizeof(uint32_t));
            continue;
        case kWriteLoop: {
            sendAll(sock, &ack, sizeof(ack));
            auto* words = reinterpret_cast<volatile uint64_t*>(base + c.off);
            uint64_t nw = c.len / 8, i = 1;
            for (;; ++i) {
                words[(i * 509) % nw] = i;
                if (i % 64 == 0) {
                    Cmd stop{};
                    if (::recv(sock, &stop, sizeof(stop), MSG_DONTWAIT) == sizeof(stop))
                        break;
                }
            }
            ack = i;
            break;
        }
        case kTouchOutside:
            sendAll(sock, &ack, sizeof(ack));
            (void)*static_cast<volatile uint8_t*>(outside); // never served
            break;
        default:
            ::_exit(2);
        }
        sendAll(sock, &ack, sizeof(ack));
    }
}

} // namespace

int sendWithFds(int sock, const void* data, size_t len, std::span<const int> fds)
{
    if (fds.size() > kMaxFds)
        return -EINVAL;
    iovec iov{const_cast<void*>(data), len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    return ::sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

ssize_t recvWithFds(int sock, void* data, size_t len, std::vector<Fd>* fds, int timeoutMs)
{
    pollfd p{sock, POLLIN, 0};
    int pr = ::poll(&p, 1, timeoutMs);
    if (pr < 0)
        return -errno;
    if (pr == 0)
        return -ETIMEDOUT;
    iovec iov{data, len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -ECONNRESET;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (fds)
                fds->emplace_back(fd);
            else
                ::close(fd);
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        return -EMSGSIZE;
    return n;
}

ClientProcess::ClientProcess(const ClientSpec& spec)
{
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        error_ = std::string("socketpair: ") + std::strerror(errno);
        return;
    }
    Fd mine(sv[0]), theirs(sv[1]);
    pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
        error_ = std::string("fork: ") + std::strerror(errno);
        return;
    }
    if (pid_ == 0) {
        mine.reset();
        clientMain(theirs.get(), spec, parent);
    }
    theirs.reset();
    sock_ = std::move(mine);
    Hello h{};
    std::vector<Fd> fds;
    ssize_t n = recvWithFds(sock_.get(), &h, sizeof(h), &fds, kCallTimeoutMs);
    if (n != sizeof(h)) {
        error_ = "no hello from the client: " + std::string(n < 0 ? std::strerror(static_cast<int>(-n)) : "short");
        return;
    }
    if (h.err) {
        error_ = std::string(kSteps[h.step]) + ": " + std::strerror(h.err);
        return;
    }
    if (fds.size() != 2) {
        error_ = "the client passed " + std::to_string(fds.size()) + " fds, not 2";
        return;
    }
    memfd_ = std::move(fds[0]);
    uffd_ = std::move(fds[1]);
    base_ = h.base;
    outside_ = h.outside;
}

ClientProcess::~ClientProcess()
{
    kill();
}

void ClientProcess::kill()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGKILL);
    int st;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
}

ClientMemory ClientProcess::memory()
{
    return ClientMemory{std::move(memfd_), std::move(uffd_), base_};
}

bool ClientProcess::call(uint32_t op, uint64_t off, uint64_t len, uint32_t arg, void* reply, size_t replyLen)
{
    Cmd c{op, arg, off, len};
    if (::send(sock_.get(), &c, sizeof(c), MSG_NOSIGNAL) != sizeof(c)) {
        ADD_FAILURE() << "send command " << op << " to the client: " << std::strerror(errno);
        return false;
    }
    if (!reply)
        return true;
    ssize_t n = recvWithFds(sock_.get(), reply, replyLen, nullptr, kCallTimeoutMs);
    if (n != static_cast<ssize_t>(replyLen)) {
        ADD_FAILURE() << "client command " << op << ": "
                      << (n < 0 ? std::strerror(static_cast<int>(-n)) : "short answer");
        return false;
    }
    return true;
}

std::vector<uint8_t> ClientProcess::read(uint64_t off, uint64_t len)
{
    std::vector<uint8_t> v(len);
    if (len > kMaxRead || !call(kRead, off, len, 0, v.data(), len))
        return {};
    return v;
}

bool ClientProcess::write(uint64_t off, uint64_t len, uint8_t byte)
{
    uint64_t ack = 1;
    return call(kWrite, off, len, byte, &ack, sizeof(ack)) && ack == 0;
}

bool ClientProcess::fill(uint64_t off, uint64_t len, uint32_t seed)
{
    uint64_t ack = 1;
    return call(kFill, off, len, seed, &ack, sizeof(ack)) && ack == 0;
}

bool ClientProcess::punch(uint64_t off, uint64_t len)
{
    uint64_t ack = 1;
    return call(kPunch, off, len, 0, &ack, sizeof(ack)) && ack == 0;
}

std::vector<uint32_t> ClientProcess::touch(uint64_t off, uint64_t len)
{
    std::vector<uint32_t> v(len / kPg);
    if (v.size() * sizeof(uint32_t) > kMaxRead || !call(kTouch, off, len, 0, v.data(), v.size() * sizeof(uint32_t)))
        return {};
    return v;
}

bool ClientProcess::startWriteLoop(uint64_t off, uint64_t len)
{
    uint64_t ack = 1;
    return call(kWriteLoop, off, len, 0, &ack, sizeof(ack)) && ack == 0;
}

uint64_t ClientProcess::stopWriteLoop()
{
    uint64_t writes = 0;
    return call(kStop, 0, 0, 0, &writes, sizeof(writes)) ? writes : 0;
}

bool ClientProcess::touchOutside()
{
    uint64_t ack = 1;
    return call(kTouchOutside, 0, 0, 0, &ack, sizeof(ack)) && ack == 0;
}

std::vector<uint64_t> writeLoopImage(uint64_t len, uint64_t writes)
{
    std::vector<uint64_t> words(len / 8, 0);
    for (uint64_t i = 1; i <= writes; ++i)
        words[(i * 509) % words.size()] = i;
    return words;
}

} // namespace npf::test
