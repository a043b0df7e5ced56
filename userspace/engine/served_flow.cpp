#include "engine/served_flow.h"

#include <new>
#include <string>

#include "region/region.h"

namespace npf {

ServedFlow::ServedFlow(dataplane::EngineFlow flow, const dataplane::FlowSpec& s, Region& r,
                       std::chrono::nanoseconds reorderTimeout, uint32_t completionRingSize,
                       const CreditSetup& credits)
    : id(flow.entry.id),
      gen(flow.entry.gen),
      spec(s),
      ownsEntry(flow.origin != dataplane::FlowOrigin::FromOperator),
      ringMap(std::move(flow.ring)),
      region(r),
      regionSize(r.size()),
      cursor(ringMap.cursor()),
      posts(ringMap.posts(), ringMap.cursor()),
      xdpAtOpen(flow.xdpAtOpen),
      seq(posts.slots(), SequencerConfig{posts.consumed(), reorderTimeout}),
      ring(CompletionRing::create(completionRingSize, "npf-flow-" + std::to_string(s.port))),
      credits(credits.cfg.enabled ? std::make_unique<FlowCredits>(credits, posts.consumed()) : nullptr),
      settled(posts.consumed()),
      sampled(posts.consumed()),
      producer_(ring)
{
}

void ServedFlow::syncProtection() noexcept
{
    if (!protected_) {
        protected_.reset(new (std::nothrow) Protected[NPF_POST_RING_SIZE]());
        if (!protected_)
            return;
        protectedTo_ = releasedTo_ = seq.head();
    }
    // Published: the application has the buffer back (or will have it).
    const uint64_t head = seq.head();
    for (; releasedTo_ < head; releasedTo_++) {
        Protected& p = protected_[releasedTo_ & dataplane::PostSlots::kMask];
        if (p.len)
            region.unprotect(p.offset, p.len);
        p.len = 0;
    }
    // Posted since: the client writes prod; trust it no further than the ring.
    uint64_t prod = posts.published();
    if (prod - head > NPF_POST_RING_SIZE)
        prod = head + NPF_POST_RING_SIZE;
    if (protectedTo_ < head)
        protectedTo_ = head;
    for (; protectedTo_ < prod; protectedTo_++) {
        const dataplane::Post post = posts.slot(protectedTo_);
        Protected& p = protected_[protectedTo_ & dataplane::PostSlots::kMask];
        if (p.len || post.len == 0 || post.offset > regionSize || post.len > regionSize - post.offset)
            continue;
        if (region.protect(post.offset, post.len)) // else the budget left it out (counted)
            p = {post.offset, post.len};
    }
}

void ServedFlow::releaseProtection() noexcept
{
    if (!protected_)
        return;
    for (uint64_t s = releasedTo_; s < protectedTo_; s++) {
        Protected& p = protected_[s & dataplane::PostSlots::kMask];
        if (p.len)
            region.unprotect(p.offset, p.len);
        p.len = 0;
    }
}

void ServedFlow::publish(uint64_t nowNs) noexcept
{
    // The sequencer writes in batches of Sequencer::kBatch: the application
    // is woken once, after the last.
    struct Quiet {
        CompletionProducer& p;
        size_t room() noexcept { return p.room(); }
        void write(std::span<const npf_completion> batch) noexcept { (void)p.append(batch); }
    } sink{producer_};
    std::lock_guard<std::mutex> lock(publishMu_);
    if (seq.publish(nowNs, settled.load(std::memory_order_acquire), sink))
        producer_.wakeIfWaiting();
}

} // namespace npf
