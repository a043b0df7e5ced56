#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>

#include "engine/flow_impl.h"
#include "region/region.h"
#include "sys/clock.h"
#include "sys/error.h"

namespace npf {

Flow::Impl::Impl(Parts p)
    : parts(std::move(p)),
      posts(std::make_unique<dataplane::PostProducer>(parts.ring->posts, &parts.ring->cursor)),
      completions(*parts.completions),
      polled(posts->start()),
      posted(new Posted[NPF_POST_RING_SIZE]())
{
    if (!parts.runFastPath)
        return;
    events.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!events)
        throwErrno("epoll_create1 for flow " + std::to_string(parts.port));
    std::vector<int> fds = parts.fastPathFds;
    fds.push_back(completions.notifyFd());
    for (int fd : fds) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        checkErrno(::epoll_ctl(events.get(), EPOLL_CTL_ADD, fd, &ev),
                   "add fd " + std::to_string(fd) + " to the event set of flow " + std::to_string(parts.port));
    }
}

Flow::Impl::~Impl()
{
    if (!parts.region)
        return;
    for (uint64_t seq = polled; seq != posts->produced(); ++seq) {
        const Posted& p = posted[seq & dataplane::PostSlots::kMask];
        if (p.isProtected)
            parts.region->unprotect(p.offset, p.len);
    }
}

Flow::Flow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Flow::~Flow() = default;

uint32_t Flow::id() const noexcept { return impl_->parts.id; }
uint16_t Flow::port() const noexcept { return impl_->parts.port; }
std::string Flow::failure() const { return impl_->parts.failure ? impl_->parts.failure() : ""; }

FlowStats Flow::stats() const { return impl_->parts.stats(); }
int Flow::eventFd() const noexcept
{
    return impl_->events ? impl_->events.get() : impl_->completions.notifyFd();
}
uint64_t Flow::outstanding() const noexcept { return impl_->posts->produced() - impl_->polled; }

bool Flow::post(uint64_t offset, uint32_t len, uint64_t cookie)
{
    Impl& f = *impl_;
    const uint64_t size = f.parts.regionSize;
    if (len == 0 || len > size || offset > size - len)
        throw std::invalid_argument("post [" + std::to_string(offset) + ", +" + std::to_string(len) +
                                    ") is outside the region of " + std::to_string(size) + " bytes");
    // A slot is reused only after the application polled its completion, so
    // the sequencer's window and posted[] stay valid.
    if (outstanding() >= NPF_POST_RING_SIZE)
        return false;
    const bool isProtected = f.parts.region && f.parts.region->protect(offset, len);
    f.posted[f.posts->produced() & dataplane::PostSlots::kMask] = {offset, cookie, len, isProtected};
    f.posts->post(offset, len);
    if (f.posts->unpublished() >= kPostBurst)
        flush();
    return true;
}

void Flow::flush() noexcept { impl_->posts->publish(); }

int Flow::poll(std::span<npf_completion> out) noexcept
{
    flush();
    Impl& f = *impl_;
    if (f.parts.runFastPath)
        (void)f.parts.runFastPath();
    const uint64_t badBefore = f.completions.badProd();
    const size_t n = f.completions.poll(std::min<size_t>(out.size(), INT32_MAX), out.data());
    for (size_t i = 0; i < n; i++) {
        // What this side posted, not what the ring says it was.
        const Impl::Posted& p = f.posted[out[i].seq & dataplane::PostSlots::kMask];
        if (p.isProtected)
            f.parts.region->unprotect(p.offset, p.len);
        out[i].offset = p.offset;
        out[i].cookie = p.cookie;
        f.polled++;
    }
    if (n || out.empty())
        return static_cast<int>(n);
    if (f.completions.badProd() != badBefore)
        return -EPROTO;
    return f.parts.error ? f.parts.error(false) : 0;
}

int Flow::arm() noexcept
{
    flush();
    Impl& f = *impl_;
    if (f.parts.runFastPath)
        (void)f.parts.runFastPath(); // then datagrams arriving later make a queue's socket readable
    const int r = f.completions.arm();
    if (r != 0)
        return r;
    return f.parts.error ? f.parts.error(true) : 0;
}

int Flow::wait(std::span<npf_completion> out, std::chrono::milliseconds timeout) noexcept
{
    if (impl_->parts.runFastPath)
        return waitRunning(out, timeout);
    int n = poll(out);
    if (n || out.empty())
        return n;
    Impl& f = *impl_;
    if (int err = f.parts.error ? f.parts.error(true) : 0)
        return err; // nothing will come: do not block
    const int r = f.completions.wait(timeout, f.parts.hangupFd);
    if (r < 0)
        return r;
    n = poll(out);
    if (n || r > 0)
        return n;
    if (f.parts.idle)
        f.parts.idle(); // a whole timeout without a datagram
    // Woken with nothing ready: the timeout, or the service stopped.
    return f.parts.error ? f.parts.error(true) : 0;
}

namespace {
constexpr int kSpinsBeforeSleep = 16;
} // namespace

// Run to completion: this thread runs the fast path (arm() and poll() do),
// and sleeps on the flow's event set (a queue's socket, the notifier) when
// there is nothing to run and nothing ready.
int Flow::waitRunning(std::span<npf_completion> out, std::chrono::milliseconds timeout) noexcept
{
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + timeout;
    Impl& f = *impl_;
    int idle = 0;
    for (;;) {
        const int n = poll(out);
        if (n || out.empty())
            return n;
        if (int err = f.parts.error ? f.parts.error(true) : 0)
            return err;
        // As the worker thread does: yield a few times before sleeping (a
        // sleeper costs each arriving datagram a wake-up on the CPU that
        // receives it).
        if (++idle < kSpinsBeforeSleep) {
            sched_yield();
            continue;
        }
        idle = 0;
        const int armed = arm();
        if (armed < 0)
            return armed;
        if (armed > 0)
            continue;
        const int ms = pollTimeoutMs(timeout, deadline);
        pollfd p{f.events.get(), POLLIN, 0};
        const int rc = ::poll(&p, 1, ms);
        if (rc < 0 && errno != EINTR)
            return -errno;
        if (rc == 0 || (timeout.count() >= 0 && Clock::now() >= deadline)) {
            const int last = poll(out);
            return last ? last : (f.parts.error ? f.parts.error(true) : 0);
        }
    }
}

} // namespace npf
