#include <cerrno>
#include <stdexcept>
#include <string>

#include "engine/flow_impl.h"
#include "region/region.h"

namespace npf {

Flow::Impl::Impl(Parts p)
    : parts(std::move(p)),
      posts(std::make_unique<dataplane::PostProducer>(parts.ring->posts, &parts.ring->cursor)),
      completions(*parts.completions),
      polled(posts->start()),
      posted(new Posted[NPF_POST_RING_SIZE]())
{
}

Flow::Impl::~Impl()
{
    if (!parts.region)
        return;
    for (uint64_t seq = polled; seq != posts->produced(); ++seq) {
        const Posted& p = posted[seq & dataplane::PostSlots::kMask];
        parts.region->unprotect(p.offset, p.len);
    }
}

Flow::Flow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Flow::~Flow() = default;

uint32_t Flow::id() const noexcept { return impl_->parts.id; }
uint16_t Flow::port() const noexcept { return impl_->parts.port; }
std::string Flow::failure() const { return impl_->parts.failure ? impl_->parts.failure() : ""; }

FlowStats Flow::stats() const { return impl_->parts.stats(); }
int Flow::eventFd() const noexcept { return impl_->completions.notifyFd(); }
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
    if (f.parts.region)
        f.parts.region->protect(offset, len);
    f.posted[f.posts->produced() & dataplane::PostSlots::kMask] = {offset, cookie, len};
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
    const uint64_t badBefore = f.completions.badProd();
    const size_t n = f.completions.poll(std::min<size_t>(out.size(), INT32_MAX), out.data());
    for (size_t i = 0; i < n; i++) {
        // What this side posted, not what the ring says it was.
        const Impl::Posted& p = f.posted[out[i].seq & dataplane::PostSlots::kMask];
        if (f.parts.region)
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
    const int r = f.completions.arm();
    if (r != 0)
        return r;
    return f.parts.error ? f.parts.error(true) : 0;
}

int Flow::wait(std::span<npf_completion> out, std::chrono::milliseconds timeout) noexcept
{
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

} // namespace npf
