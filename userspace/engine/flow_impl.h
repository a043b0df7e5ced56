// The application's side of one flow (npf::Flow): posting buffers and
// polling completions. One application thread; the engine's side is
// ServedFlow.
#pragma once

#include <memory>

#include "engine/served_flow.h"
#include "npf/engine.h"
#include "order/completion_ring.h"
#include "order/post_ring.h"

namespace npf {

class Region;

struct Flow::Impl {
    Impl(ServedFlow& served, Region& region, std::unique_ptr<PostProducer> posts);

    ServedFlow& served;
    Region& region;
    std::unique_ptr<PostProducer> posts;
    CompletionConsumer completions;
    uint64_t polled; // completions taken: posts - polled buffers are outstanding
    std::unique_ptr<uint32_t[]> postedLen; // per slot: the length protect() covered
};

} // namespace npf
