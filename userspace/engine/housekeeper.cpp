#include "engine/housekeeper.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sys/log.h"

namespace npf {

bool Housekeeper::round(uint64_t nowNs) noexcept
{
    if (nowNs < nextTick_)
        return true;
    ctx_.hooks.tick();
    nextTick_ = nowNs + 500'000'000ull;
    // AF_XDP sockets report no POLLERR: ask them with the snapshot.
    for (auto& q : ctx_.queues)
        if (socketGone(q->backupFd())) {
            NPF_ERR("%s is gone (deleted, or moved out of this network namespace): the engine stops serving it",
                    ctx_.cfg.ifname.c_str());
            ctx_.hooks.gone();
            ctx_.flows.forEach([](ServedFlow& f) { f.wakeApplication(); });
            return false;
        }
    return true;
}

// The kernel unbinds every AF_XDP socket of an interface that is deleted or
// leaves the namespace (NETDEV_UNREGISTER) and sets ENETDOWN as its error.
bool Housekeeper::socketGone(int fd) noexcept
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err == 0)
        return false;
    if (err != ENETDOWN) {
        NPF_WARN_RL("npf pager: AF_XDP socket error on %s: %s", ctx_.cfg.ifname.c_str(), strerror(err));
        return false;
    }
    return true;
}

int Housekeeper::timeoutMs(uint64_t nowNs) const noexcept
{
    int timeout = kMaxSleepMs;
    ctx_.flows.forEach([&](ServedFlow& f) {
        if (f.posts.consumed() > f.seq.head())
            timeout = std::min(timeout, 1);
        const uint64_t d = f.seq.nextDeadline();
        if (d != UINT64_MAX)
            timeout = std::min<int64_t>(timeout, d > nowNs ? int64_t((d - nowNs + 999'999) / 1'000'000) : 0);
    });
    return timeout;
}

} // namespace npf
