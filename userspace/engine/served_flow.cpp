#include "engine/served_flow.h"

#include <string>

#include "region/region.h"

namespace npf {

ServedFlow::ServedFlow(ctl::EngineFlow flow, const ctl::FlowSpec& s, Region& r,
                       std::chrono::nanoseconds reorderTimeout, uint32_t completionRingSize)
    : id(flow.entry.id),
      gen(flow.entry.gen),
      spec(s),
      ownsEntry(flow.origin != ctl::FlowOrigin::FromOperator),
      ringMap(std::move(flow.ring)),
      region(r),
      regionSize(r.size()),
      cursor(ringMap.cursor()),
      posts(ringMap.posts(), ringMap.cursor()),
      seq(posts.slots(), SequencerConfig{posts.consumed(), reorderTimeout}),
      ring(CompletionRing::create(completionRingSize, "npf-flow-" + std::to_string(s.port))),
      settled(posts.consumed()),
      sampled(posts.consumed()),
      producer_(ring)
{
}

void ServedFlow::publish(uint64_t nowNs) noexcept
{
    std::lock_guard<std::mutex> lock(publishMu_);
    seq.publish(nowNs, settled.load(std::memory_order_acquire), producer_);
}

} // namespace npf
