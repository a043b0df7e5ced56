// npfd's socket file: parent directories, mode and group, a stale socket
// replaced, a live one refused, the path removed by its own listener only;
// connect errors that say what is wrong; peer credentials of a client that
// dropped root.
#include "../common/wait.h" // header-only
#include "ipc/unix_socket.h"
#include "ipc_test_util.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstring>
#include <fstream>
#include <string>

namespace npf::test {
namespace {

using ipc::connectSocket;
using ipc::IoStatus;
using ipc::listenSocket;
using ipc::Listener;

constexpr uid_t kNobody = 65534;

mode_t modeOf(const std::string& path)
{
    struct stat st;
    if (::lstat(path.c_str(), &st) < 0)
        return 0;
    return st.st_mode;
}

bool exists(const std::string& path)
{
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
}

std::string whatOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

// A socket file nobody listens on (what a killed daemon leaves).
void makeStale(const std::string& path)
{
    Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
}

// The next connection, waiting for it (the listener is non-blocking).
Fd acceptOne(Listener& l)
{
    pollfd p{l.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kDeadline.count())) != 1)
        return Fd();
    return l.accept();
}

TEST(Listen, CreatesParentsAndSetsMode)
{
    TempDir dir;
    const std::string path = dir / "run/npf/npfd.sock";
    const mode_t old = ::umask(077); // the result must not depend on it
    Listener l = listenSocket(path);
    ::umask(old);
    EXPECT_TRUE(S_ISSOCK(modeOf(path)));
    EXPECT_EQ(modeOf(path) & 07777, 0660u);
    EXPECT_EQ(modeOf(dir / "run") & 07777, 0755u);
    EXPECT_EQ(modeOf(dir / "run/npf") & 07777, 0755u);
    EXPECT_EQ(l.path(), path);
    EXPECT_TRUE(::fcntl(l.fd(), F_GETFL) & O_NONBLOCK);
    EXPECT_TRUE(::fcntl(l.fd(), F_GETFD) & FD_CLOEXEC);

    Listener other = listenSocket(dir / "other.sock", 0600);
    EXPECT_EQ(modeOf(dir / "other.sock") & 07777, 0600u);
}

TEST(Listen, SetsTheGroupByNameOrNumber)
{
    TempDir dir;
    {
        Listener l = listenSocket(dir / "num.sock", 0660, "4242");
        struct stat st;
        ASSERT_EQ(::stat((dir / "num.sock").c_str(), &st), 0);
        EXPECT_EQ(st.st_gid, 4242u);
    }
    // A named group other than root's, if this system has one.
    std::string name;
    gid_t gid = 0;
    ::setgrent();
    while (group* g = ::getgrent())
        if (g->gr_gid != 0) {
            name = g->gr_name;
            gid = g->gr_gid;
            break;
        }
    ::endgrent();
    if (name.empty())
        GTEST_SKIP() << "no group other than root in /etc/group";
    Listener l = listenSocket(dir / "named.sock", 0660, name);
    struct stat st;
    ASSERT_EQ(::stat((dir / "named.sock").c_str(), &st), 0);
    EXPECT_EQ(st.st_gid, gid) << name;
}

TEST(Listen, UnknownGroupLeavesNoSocket)
{
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    int err = 0;
    std::string what;
    try {
        listenSocket(path, 0660, "no-such-group-npf");
    } catch (const std::system_error& e) {
        err = e.code().value();
        what = e.what();
    }
    EXPECT_EQ(err, ENOENT);
    EXPECT_NE(what.find("no-such-group-npf"), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_FALSE(exists(path));
}

TEST(Listen, ReplacesAStaleSocket)
{
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    makeStale(path);
    ASSERT_TRUE(S_ISSOCK(modeOf(path)));
    EXPECT_EQ(errnoOf([&] { connectSocket(path); }), ECONNREFUSED);

    Listener l = listenSocket(path);
    Fd c = connectSocket(path);
    Fd s = acceptOne(l);
    ASSERT_TRUE(s);
    ASSERT_EQ(ipc::sendMessage(c.get(), "ping"), IoStatus::Ok);
    pollfd p{s.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, static_cast<int>(kDeadline.count())), 1);
    EXPECT_EQ(ipc::recvMessage(s.get()).message.bytes, "ping");
}

TEST(Listen, RefusesALiveDaemonsSocket)
{
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    Listener first = listenSocket(path);
    int err = 0;
    std::string what;
    try {
        listenSocket(path);
    } catch (const std::system_error& e) {
        err = e.code().value();
        what = e.what();
    }
    EXPECT_EQ(err, EADDRINUSE);
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("listening"), std::string::npos) << what;

    // The first daemon still serves: the refused attempt touched nothing.
    Fd c = connectSocket(path);
    EXPECT_TRUE(acceptOne(first));
}

TEST(Listen, RefusesAPathThatIsNotASocket)
{
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    std::ofstream(path) << "precious";
    EXPECT_EQ(errnoOf([&] { listenSocket(path); }), EEXIST);
    EXPECT_TRUE(S_ISREG(modeOf(path)));
    EXPECT_EQ(errnoOf([&] { listenSocket(dir / "npfd.sock/x"); }), ENOTDIR);
    EXPECT_EQ(errnoOf([&] { listenSocket(dir / std::string(120, 'x')); }), ENAMETOOLONG);
}

TEST(Listen, RemovesOnlyItsOwnPath)
{
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    { Listener l = listenSocket(path); }
    EXPECT_FALSE(exists(path));

    // An operator removed the first daemon's socket and started another.
    Listener old = listenSocket(path);
    ASSERT_EQ(::unlink(path.c_str()), 0);
    Listener current = listenSocket(path);
    old = Listener();
    EXPECT_TRUE(exists(path));
    Fd c = connectSocket(path);
    EXPECT_TRUE(acceptOne(current));
}

TEST(Connect, SaysWhatIsWrong)
{
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    int err = 0;
    std::string what;
    try {
        connectSocket(path);
    } catch (const std::system_error& e) {
        err = e.code().value();
        what = e.what();
    }
    EXPECT_EQ(err, ENOENT);
    EXPECT_EQ(what, "npfd is not running? no socket at " + path);

    makeStale(path);
    what = whatOf([&] { connectSocket(path); });
    EXPECT_NE(what.find("npfd is not running?"), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
}

TEST(Listen, AcceptIsNonBlockingAndSeesThePeer)
{
    TempDir dir;
    Listener l = listenSocket(dir / "npfd.sock");
    EXPECT_FALSE(l.accept()); // nothing pending
    Fd c = connectSocket(dir / "npfd.sock");
    Fd s = acceptOne(l);
    ASSERT_TRUE(s);
    EXPECT_TRUE(::fcntl(s.get(), F_GETFL) & O_NONBLOCK);
    EXPECT_TRUE(::fcntl(s.get(), F_GETFD) & FD_CLOEXEC);
    EXPECT_FALSE(::fcntl(c.get(), F_GETFL) & O_NONBLOCK);
    ipc::PeerCred pc = ipc::peerCred(s.get());
    EXPECT_EQ(pc.pid, ::getpid());
    EXPECT_EQ(pc.uid, ::getuid());
    EXPECT_EQ(pc.gid, ::getgid());
}

// Child: drop to nobody (with `gid`), connect, send "hi", wait for the
// parent to close. Exit 0, or 10 + errno of the connect (capped).
[[noreturn]] void childAsNobody(const std::string& path, gid_t gid)
{
    if (::setgroups(0, nullptr) < 0 || ::setgid(gid) < 0 || ::setuid(kNobody) < 0)
        ::_exit(2);
    try {
        Fd c = connectSocket(path);
        if (ipc::sendMessage(c.get(), "hi") != IoStatus::Ok)
            ::_exit(3);
        char b;
        (void)::read(c.get(), &b, 1); // until the parent closes
        ::_exit(0);
    } catch (const std::system_error& e) {
        const bool says = std::string(e.what()).find("no permission to connect to " + path) != std::string::npos;
        ::_exit(says ? 10 + std::min(e.code().value(), 100) : 4);
    } catch (...) {
        ::_exit(5);
    }
}

int reap(pid_t child)
{
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

TEST(PeerCred, OfAChildThatDroppedRoot)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root (setuid to 65534)";
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    Listener l = listenSocket(path, 0660, std::to_string(kNobody)); // group access for the child
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0)
        childAsNobody(path, kNobody);

    Fd s = acceptOne(l);
    ASSERT_TRUE(s);
    ipc::PeerCred pc = ipc::peerCred(s.get());
    EXPECT_EQ(pc.pid, child);
    EXPECT_EQ(pc.uid, kNobody);
    EXPECT_EQ(pc.gid, kNobody);
    EXPECT_EQ(ipc::peerCgroup(pc.pid), ipc::peerCgroup(::getpid()));
    pollfd p{s.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, static_cast<int>(kDeadline.count())), 1);
    EXPECT_EQ(ipc::recvMessage(s.get()).message.bytes, "hi");
    s.reset();
    EXPECT_EQ(reap(child), 0);
}

TEST(PeerCred, ModeKeepsOutsidersOut)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root (setuid to 65534)";
    TempDir dir;
    const std::string path = dir / "npfd.sock";
    Listener l = listenSocket(path, 0660); // root's group: nobody may not connect
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0)
        childAsNobody(path, kNobody);
    EXPECT_EQ(reap(child), 10 + EACCES);
    EXPECT_FALSE(l.accept());
}

} // namespace
} // namespace npf::test
