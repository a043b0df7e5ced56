// SOCK_SEQPACKET messages over socketpairs: boundaries, descriptors passed
// with SCM_RIGHTS, every way a message can be refused, EOF and EAGAIN; the
// descriptor type checks npfd applies to what clients pass.
#include "ipc/unix_socket.h"
#include "ipc_test_util.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace npf::test {
namespace {

using ipc::IoStatus;
using ipc::kMaxFds;
using ipc::kMaxMessage;
using ipc::recvMessage;
using ipc::sendMessage;

struct Pair {
    Pair() { ipc::socketPair(a, b); }
    Fd a, b;
};

// Sends with sendmsg directly, bypassing sendMessage's own limits.
ssize_t rawSend(int fd, const std::string& bytes, const std::vector<int>& fds)
{
    iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(fds.size() * sizeof(int)));
    if (!fds.empty()) {
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    return ::sendmsg(fd, &msg, MSG_NOSIGNAL);
}

TEST(UnixSocket, MessagesKeepTheirBoundaries)
{
    Pair p;
    const std::vector<std::string> msgs = {"a", "hello", std::string(1000, 'x'), "{}"};
    for (const std::string& m : msgs)
        ASSERT_EQ(sendMessage(p.a.get(), m), IoStatus::Ok);
    for (const std::string& m : msgs) {
        ipc::RecvResult r = recvMessage(p.b.get());
        ASSERT_EQ(r.status, IoStatus::Ok);
        EXPECT_EQ(r.message.bytes, m);
        EXPECT_TRUE(r.message.fds.empty());
    }
}

TEST(UnixSocket, LargestMessageFits)
{
    Pair p;
    std::string big(kMaxMessage, 'z');
    big.front() = 'A';
    big.back() = 'Z';
    ASSERT_EQ(sendMessage(p.a.get(), big), IoStatus::Ok);
    ipc::RecvResult r = recvMessage(p.b.get());
    ASSERT_EQ(r.status, IoStatus::Ok);
    EXPECT_EQ(r.message.bytes, big);
}

TEST(UnixSocket, PassesDescriptorsInOrder)
{
    Pair p;
    Fd memfd = makeMemfd("npf-test", 1 << 20);
    Fd uffd = makeUserfaultfd();
    ASSERT_TRUE(uffd) << "userfaultfd: " << std::strerror(errno);
    Fd efd = makeEventfd();
    const std::array<int, 3> fds = {memfd.get(), uffd.get(), efd.get()};
    ASSERT_EQ(sendMessage(p.a.get(), "region", fds), IoStatus::Ok);

    ipc::RecvResult r = recvMessage(p.b.get());
    ASSERT_EQ(r.status, IoStatus::Ok);
    EXPECT_EQ(r.message.bytes, "region");
    ASSERT_EQ(r.message.fds.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_NE(r.message.fds[i].get(), fds[i]); // new descriptors, same files
        EXPECT_TRUE(sameFile(r.message.fds[i].get(), fds[i])) << i;
        EXPECT_TRUE(::fcntl(r.message.fds[i].get(), F_GETFD) & FD_CLOEXEC) << i;
    }
    EXPECT_TRUE(ipc::isMemfd(r.message.fds[0].get()));
    EXPECT_TRUE(ipc::isUserfaultfd(r.message.fds[1].get()));
    EXPECT_TRUE(ipc::isEventfd(r.message.fds[2].get()));
    EXPECT_EQ(ipc::fdSize(r.message.fds[0].get()), 1u << 20);
}

TEST(UnixSocket, MaxFdsPass)
{
    Pair p;
    std::vector<Fd> own;
    std::vector<int> fds;
    for (size_t i = 0; i < kMaxFds; ++i) {
        own.push_back(makeEventfd());
        fds.push_back(own.back().get());
    }
    ASSERT_EQ(sendMessage(p.a.get(), "four", fds), IoStatus::Ok);
    ipc::RecvResult r = recvMessage(p.b.get());
    ASSERT_EQ(r.status, IoStatus::Ok);
    EXPECT_EQ(r.message.fds.size(), kMaxFds);
}

TEST(UnixSocket, DescriptorTypeChecks)
{
    Fd memfd = makeMemfd("npf-kinds", 8192);
    Fd efd = makeEventfd();
    Fd uffd = makeUserfaultfd();
    ASSERT_TRUE(uffd);
    int pipefd[2];
    ASSERT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);
    Fd r(pipefd[0]), w(pipefd[1]);
    TempDir dir;
    Fd file(::open((dir / "plain").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
    ASSERT_TRUE(file);
    Pair sock;

    struct Case {
        const char* name;
        int fd;
        bool memfd, uffd, eventfd;
    };
    const Case cases[] = {
        {"memfd", memfd.get(), true, false, false},
        {"eventfd", efd.get(), false, false, true},
        {"userfaultfd", uffd.get(), false, true, false},
        {"pipe", r.get(), false, false, false},
        {"socket", sock.a.get(), false, false, false},
        {"closed", -1, false, false, false},
    };
    for (const Case& c : cases) {
        EXPECT_EQ(ipc::isMemfd(c.fd), c.memfd) << c.name;
        EXPECT_EQ(ipc::isUserfaultfd(c.fd), c.uffd) << c.name;
        EXPECT_EQ(ipc::isEventfd(c.fd), c.eventfd) << c.name;
    }
    // A file on a disk file system is no memfd; one on tmpfs answers
    // F_GET_SEALS and counts as one (shmem, what the region needs).
    struct statfs fs;
    ASSERT_EQ(::fstatfs(file.get(), &fs), 0);
    EXPECT_EQ(ipc::isMemfd(file.get()), fs.f_type == TMPFS_MAGIC);
    EXPECT_FALSE(ipc::isUserfaultfd(file.get()));
    EXPECT_EQ(ipc::fdSize(memfd.get()), 8192u);
    EXPECT_EQ(errnoOf([&] { ipc::fdSize(-1); }), EBADF);
}

TEST(UnixSocket, SendRefusesWhatTheReceiverWould)
{
    Pair p;
    std::vector<Fd> own;
    std::vector<int> five;
    for (int i = 0; i < 5; ++i) {
        own.push_back(makeEventfd());
        five.push_back(own.back().get());
    }
    EXPECT_EQ(errnoOf([&] { sendMessage(p.a.get(), "x", five); }), ETOOMANYREFS);
    EXPECT_EQ(errnoOf([&] { sendMessage(p.a.get(), std::string(kMaxMessage + 1, 'x')); }), EMSGSIZE);
    EXPECT_EQ(errnoOf([&] { sendMessage(p.a.get(), ""); }), EINVAL);
    const int bad[] = {-1};
    EXPECT_EQ(errnoOf([&] { sendMessage(p.a.get(), "x", bad); }), EBADF);
}

TEST(UnixSocket, TooManyFdsIsAnErrorAndLeaksNothing)
{
    Pair p;
    const int before = openFds();
    {
        std::vector<Fd> own;
        std::vector<int> fds;
        for (size_t i = 0; i < kMaxFds + 1; ++i) {
            own.push_back(makeMemfd("npf-five", 4096));
            fds.push_back(own.back().get());
        }
        ASSERT_EQ(rawSend(p.a.get(), "five", fds), 4);
        int err = 0;
        std::string what;
        try {
            recvMessage(p.b.get());
        } catch (const std::system_error& e) {
            err = e.code().value();
            what = e.what();
        }
        EXPECT_EQ(err, ETOOMANYREFS);
        EXPECT_NE(what.find("more than 4 descriptors"), std::string::npos) << what;
    }
    EXPECT_EQ(openFds(), before);

    // The connection is still usable.
    ASSERT_EQ(sendMessage(p.a.get(), "next"), IoStatus::Ok);
    ipc::RecvResult r = recvMessage(p.b.get());
    ASSERT_EQ(r.status, IoStatus::Ok);
    EXPECT_EQ(r.message.bytes, "next");
}

TEST(UnixSocket, OutOfDescriptorsIsEmfile)
{
    Pair p;
    Fd a = makeEventfd(), b = makeEventfd();
    const int fds[] = {a.get(), b.get()};
    ASSERT_EQ(sendMessage(p.a.get(), "two", fds), IoStatus::Ok);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // Every descriptor slot taken: the kernel installs none of the two.
        rlimit lim{64, 64};
        if (::setrlimit(RLIMIT_NOFILE, &lim) < 0)
            ::_exit(2);
        while (::dup(p.b.get()) >= 0) {
        }
        try {
            recvMessage(p.b.get());
        } catch (const std::system_error& e) {
            ::_exit(e.code().value() == EMFILE ? 0 : 3);
        }
        ::_exit(4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(UnixSocket, OversizedMessageIsDiscardedWithItsFds)
{
    Pair p;
    int sndbuf = 1 << 20;
    ASSERT_EQ(::setsockopt(p.a.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    const int before = openFds();
    {
        Fd efd = makeEventfd();
        ASSERT_EQ(rawSend(p.a.get(), std::string(kMaxMessage + 1, 'o'), {efd.get()}), ssize_t(kMaxMessage + 1));
        std::string what;
        int err = 0;
        try {
            recvMessage(p.b.get());
        } catch (const std::system_error& e) {
            err = e.code().value();
            what = e.what();
        }
        EXPECT_EQ(err, EMSGSIZE);
        EXPECT_NE(what.find("oversized"), std::string::npos) << what;
    }
    EXPECT_EQ(openFds(), before);

    ASSERT_EQ(sendMessage(p.a.get(), "after"), IoStatus::Ok);
    ipc::RecvResult r = recvMessage(p.b.get());
    ASSERT_EQ(r.status, IoStatus::Ok);
    EXPECT_EQ(r.message.bytes, "after");
}

TEST(UnixSocket, EofAfterPendingMessages)
{
    Pair p;
    ASSERT_EQ(sendMessage(p.a.get(), "last words"), IoStatus::Ok);
    p.a.reset();
    ipc::RecvResult r = recvMessage(p.b.get());
    ASSERT_EQ(r.status, IoStatus::Ok);
    EXPECT_EQ(r.message.bytes, "last words");
    EXPECT_EQ(recvMessage(p.b.get()).status, IoStatus::Eof);
    EXPECT_EQ(recvMessage(p.b.get()).status, IoStatus::Eof); // and stays so
}

TEST(UnixSocket, SendToClosedPeerIsEof)
{
    Pair p;
    p.b.reset();
    EXPECT_EQ(sendMessage(p.a.get(), "anyone?"), IoStatus::Eof); // no SIGPIPE either
}

TEST(UnixSocket, NonBlockingReportsWouldBlock)
{
    Pair p;
    ipc::setNonBlocking(p.a.get(), true);
    ipc::setNonBlocking(p.b.get(), true);
    EXPECT_EQ(recvMessage(p.b.get()).status, IoStatus::WouldBlock);

    // Fill the peer's queue: the sender sees WouldBlock, never a short send.
    const std::string chunk(8192, 'f');
    size_t sent = 0;
    IoStatus s;
    while ((s = sendMessage(p.a.get(), chunk)) == IoStatus::Ok)
        ASSERT_LT(++sent, 100000u);
    EXPECT_EQ(s, IoStatus::WouldBlock);
    EXPECT_GT(sent, 0u);
    for (size_t i = 0; i < sent; ++i) {
        ipc::RecvResult r = recvMessage(p.b.get());
        ASSERT_EQ(r.status, IoStatus::Ok) << i;
        ASSERT_EQ(r.message.bytes.size(), chunk.size());
    }
    EXPECT_EQ(recvMessage(p.b.get()).status, IoStatus::WouldBlock);
    EXPECT_EQ(sendMessage(p.a.get(), chunk), IoStatus::Ok); // room again
}

TEST(UnixSocket, PeerCgroupIsTheUnifiedLine)
{
    std::string want;
    {
        FILE* f = std::fopen("/proc/self/cgroup", "r");
        ASSERT_NE(f, nullptr);
        char line[4096];
        while (std::fgets(line, sizeof(line), f))
            if (std::strncmp(line, "0::", 3) == 0) {
                want = line + 3;
                if (!want.empty() && want.back() == '\n')
                    want.pop_back();
            }
        std::fclose(f);
    }
    EXPECT_EQ(ipc::peerCgroup(::getpid()), want);
    if (!want.empty()) {
        EXPECT_EQ(want[0], '/');
    }

    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0)
        ::_exit(0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_EQ(errnoOf([&] { ipc::peerCgroup(child); }), ESRCH);
}

} // namespace
} // namespace npf::test
