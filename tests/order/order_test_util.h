// Helpers shared by the order tests: a post ring and a bounded vector sink.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "npf/abi.h"

namespace npf::test {

// A flow's post ring with recognisable descriptors: slot i -> offset
// base + i * 4096, len 1500 - (i % 7).
struct PostRing {
    explicit PostRing(uint64_t base = 1 << 20) : slots(NPF_POST_RING_SIZE)
    {
        for (uint32_t i = 0; i < NPF_POST_RING_SIZE; ++i)
            slots[i] = {base + uint64_t(i) * 4096, 1500 - (i % 7), 0};
    }
    const npf_post& at(uint64_t seq) const { return slots[seq & (NPF_POST_RING_SIZE - 1)]; }
    std::vector<npf_post> slots;
};

// Sink with a capacity, like a completion ring the consumer drains by hand.
struct VectorSink {
    size_t capacity = SIZE_MAX;
    std::vector<npf_completion> out;
    size_t room() const { return capacity - out.size(); }
    void write(std::span<const npf_completion> b) { out.insert(out.end(), b.begin(), b.end()); }
};

constexpr uint64_t kMs = 1'000'000; // ns

} // namespace npf::test
