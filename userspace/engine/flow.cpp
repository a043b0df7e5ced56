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
      postedLen(new uint32_t[NPF_POST_RING_SIZE]())
{
}

Flow::Flow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Flow::~Flow() = default;

uint32_t Flow::id() const noexcept { return impl_->parts.id; }
uint16_t Flow::port() const noexcept { return impl_->parts.port; }
std::string Flow::failure() const { return impl_->parts.failure ? impl_->parts.failure() : ""; }

FlowStats Flow::stats() const { return impl_->parts.stats(); }
int Flow::eventFd() const noexcept { return impl_->completions.notifyFd(); }
uint64_t Flow::outstanding() const noexcept { return impl_->posts->produced() - impl_->polled; }

bool Flow::post(uint64_t offset, uint32_t len)
{
    Impl& f = *impl_;
    const uint64_t size = f.parts.regionSize;
    if (len == 0 || len > size || offset > size - len)
        throw std::invalid_argument("post [" + std::to_string(offset) + ", +" + std::to_string(len) +
                                    ") is outside the region of " + std::to_string(size) + " bytes");
    // A slot is reused only after the application polled its completion, so
    // the sequencer's window and postedLen[] stay valid.
    if (outstanding() >= NPF_POST_RING_SIZE)
        return false;
    if (f.parts.region)
        f.parts.region->protect(offset, len);
    f.postedLen[f.posts->produced() & dataplane::PostSlots::kMask] = len;
    f.posts->post(offset, len);
    if (f.posts->unpublished() >= kPostBurst)
        flush();
    return true;
}

void Flow::flush() noexcept { impl_->posts->publish(); }

size_t Flow::poll(std::span<npf_completion> out) noexcept
{
    flush();
    Impl& f = *impl_;
    size_t n = f.completions.poll(out.size(), out.data());
    for (size_t i = 0; i < n; i++) {
        if (f.parts.region)
            f.parts.region->unprotect(out[i].offset, f.postedLen[out[i].seq & dataplane::PostSlots::kMask]);
        f.polled++;
    }
    return n;
}

size_t Flow::wait(std::span<npf_completion> out, std::chrono::milliseconds timeout) noexcept
{
    size_t n = poll(out);
    if (n || out.empty())
        return n;
    if (impl_->parts.failure && !impl_->parts.failure().empty())
        return 0; // nothing will come: do not block
    if (impl_->completions.wait(timeout, impl_->parts.hangupFd) <= 0)
        return 0;
    return poll(out);
}

} // namespace npf
