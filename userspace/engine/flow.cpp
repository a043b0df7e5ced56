#include <stdexcept>
#include <string>

#include "engine/engine_impl.h"

namespace npf {

Flow::Impl::Impl(Engine::Impl& e, ctl::FlowEntry entry, const ctl::FlowSpec& s, bool owns, uint64_t startSeq)
    : eng(e),
      id(entry.id),
      gen(entry.gen),
      spec(s),
      ownsEntry(owns),
      posts(e.maps->posts(entry.id)),
      cursor(e.maps->cursor(entry.id)),
      seq(posts, SequencerConfig{startSeq, e.cfg.reorderTimeout}),
      ring(CompletionRing::create(e.cfg.completionRingSize, "npf-flow-" + std::to_string(s.port))),
      settled(startSeq),
      sampled(startSeq),
      prod(startSeq),
      published(startSeq),
      polled(startSeq),
      postedLen(new uint32_t[NPF_POST_RING_SIZE]())
{
}

void Flow::Impl::publish(uint64_t nowNs) noexcept
{
    std::lock_guard<std::mutex> lock(publishMu);
    seq.publish(nowNs, settled.load(std::memory_order_acquire), ring);
}

Flow::Flow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Flow::~Flow() = default;

uint32_t Flow::id() const noexcept { return impl_->id; }
uint16_t Flow::port() const noexcept { return impl_->spec.port; }
int Flow::eventFd() const noexcept { return impl_->ring.eventFd(); }
uint64_t Flow::outstanding() const noexcept { return impl_->prod - impl_->polled; }

bool Flow::post(uint64_t offset, uint32_t len)
{
    Impl& f = *impl_;
    const uint64_t size = f.eng.region->size();
    if (len == 0 || len > size || offset > size - len)
        throw std::invalid_argument("post [" + std::to_string(offset) + ", +" + std::to_string(len) +
                                    ") is outside the region of " + std::to_string(size) + " bytes");
    // A slot is reused only after the application polled its completion, so
    // the sequencer's window and postedLen[] stay valid.
    if (f.prod - f.polled >= NPF_POST_RING_SIZE)
        return false;
    f.eng.region->protect(offset, len);
    const uint64_t slot = f.prod & kPostMask;
    f.postedLen[slot] = len;
    __atomic_store_n(&f.posts[slot].offset, offset, __ATOMIC_RELAXED);
    __atomic_store_n(&f.posts[slot].len, len, __ATOMIC_RELAXED);
    if (++f.prod - f.published >= kPostBurst)
        flush();
    return true;
}

void Flow::flush() noexcept
{
    Impl& f = *impl_;
    if (f.published == f.prod)
        return;
    __atomic_store_n(&f.cursor->prod, f.published = f.prod, __ATOMIC_RELEASE);
    // With its first buffers the flow is served: until then XDP passes its
    // datagrams to the kernel instead of dropping them for want of a post.
    if (!f.served) {
        __atomic_fetch_or(&f.cursor->flags, NPF_CURSOR_F_SERVED, __ATOMIC_RELEASE);
        f.served = true;
    }
}

size_t Flow::poll(std::span<npf_completion> out) noexcept
{
    flush();
    Impl& f = *impl_;
    size_t n = f.ring.poll(out.size(), out.data());
    for (size_t i = 0; i < n; i++) {
        f.eng.region->unprotect(out[i].offset, f.postedLen[out[i].seq & kPostMask]);
        f.polled++;
    }
    return n;
}

size_t Flow::wait(std::span<npf_completion> out, std::chrono::milliseconds timeout) noexcept
{
    size_t n = poll(out);
    if (n || out.empty())
        return n;
    if (impl_->ring.wait(timeout) <= 0)
        return 0;
    return poll(out);
}

} // namespace npf
