#include "sys/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <cstring>

#include "sys/error.h"
#include "sys/log.h"

namespace npf {
namespace {

constexpr const char* kSelf = "/proc/thread-self/ns/net";

} // namespace

NetnsScope::NetnsScope(const std::string& path)
{
    if (path.empty())
        return;
    Fd target(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!target)
        throwErrno("open network namespace " + path);
    enter(target.get(), path);
}

NetnsScope::NetnsScope(int nsFd, const std::string& what) { enter(nsFd, what); }

void NetnsScope::enter(int nsFd, const std::string& what)
{
    Fd orig(::open(kSelf, O_RDONLY | O_CLOEXEC));
    if (!orig)
        throwErrno(std::string("open ") + kSelf);
    // Already there: nothing to enter (setns needs CAP_SYS_ADMIN, even into
    // the namespace one is in).
    struct stat here{}, there{};
    if (::fstat(orig.get(), &here) != 0 || ::fstat(nsFd, &there) != 0)
        throwErrno("stat network namespace " + what);
    if (here.st_dev == there.st_dev && here.st_ino == there.st_ino)
        return;
    if (::setns(nsFd, CLONE_NEWNET) != 0) {
        const int err = errno;
        throwErrno(err, "enter network namespace " + what +
                            (err == EINVAL ? " (not a network namespace)"
                             : err == EPERM ? " (entering another namespace needs CAP_SYS_ADMIN)"
                                            : ""));
    }
    orig_ = std::move(orig);
}

NetnsScope::~NetnsScope()
{
    if (orig_ && ::setns(orig_.get(), CLONE_NEWNET) != 0)
        NPF_ERR("cannot return to the original network namespace: %s", std::strerror(errno));
}

} // namespace npf
