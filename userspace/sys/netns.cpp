#include "sys/netns.h"

#include <fcntl.h>
#include <sched.h>

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
    orig_.reset(::open(kSelf, O_RDONLY | O_CLOEXEC));
    if (!orig_)
        throwErrno(std::string("open ") + kSelf);
    if (::setns(nsFd, CLONE_NEWNET) != 0) {
        const int err = errno;
        orig_.reset();
        throwErrno(err, "enter network namespace " + what + (err == EINVAL ? " (not a network namespace)" : ""));
    }
}

NetnsScope::~NetnsScope()
{
    if (orig_ && ::setns(orig_.get(), CLONE_NEWNET) != 0)
        NPF_ERR("cannot return to the original network namespace: %s", std::strerror(errno));
}

} // namespace npf
