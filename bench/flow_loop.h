// The receive loop of the npf and npf-sidecar contenders on an npf::Flow (the
// same type in process and through npfd): wait for completions, account
// them, post each buffer again, and release consumed buffers (a receive
// pool's dead content) in slot order, in chunks of at least
// RxConfig::releaseMin, through the engine's or the client's release().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "meter.h"
#include "npf/engine.h"
#include "npf/log.h"
#include "receiver.h"
#include "sys/clock.h"

namespace npf::bench {

class FlowLoop {
public:
    using Release = std::function<void(uint64_t offset, uint64_t len)>;
    FlowLoop(const RxConfig& cfg, Flow& flow, const uint8_t* region, Release release)
        : cfg_(cfg), flow_(flow), region_(region), release_(std::move(release))
    {
    }

    // Posts the first buffers: as many as the ring and the region hold.
    void postInitial()
    {
        const uint64_t depth = std::min<uint64_t>(cfg_.slots(), NPF_POST_RING_SIZE);
        for (uint64_t i = 0; i < depth; i++)
            flow_.post(cfg_.slotOffset(next_++), cfg_.bufLen);
    }

    // One wait (up to 10 ms); returns the completions it took.
    size_t step(Meter& m) noexcept
    {
        npf_completion batch[256];
        const int r = flow_.wait(batch, std::chrono::milliseconds(10));
        if (r <= 0)
            return 0;
        const size_t n = static_cast<size_t>(r);
        const uint64_t now = monotonicNs();
        uint64_t bytes = 0, ok = 0, lost = 0, badCsum = 0;
        for (size_t i = 0; i < n; i++) {
            const npf_completion& c = batch[i];
            if (c.offset != relTo_) { // the slots wrapped around the region
                releaseConsumed();
                relFrom_ = c.offset & ~uint64_t(NPF_PAGE_SIZE - 1);
            }
            relTo_ = c.offset + cfg_.bufLen;
            if (c.status == NPF_CS_LOST) {
                lost++;
            } else if (c.status == NPF_CS_BAD_CSUM) {
                badCsum++;
            } else {
                m.onPayload(region_ + c.offset, c.len, now);
                bytes += c.len;
                ok++;
            }
            flow_.post(cfg_.slotOffset(next_++), cfg_.bufLen);
        }
        if (relTo_ - relFrom_ >= cfg_.releaseMin)
            releaseConsumed();
        if (lost)
            m.lost(lost);
        if (badCsum)
            m.rejected(badCsum);
        if (ok)
            m.count(uint32_t(ok), bytes, now);
        return n;
    }

private:
    // Buffers are consumed in slot order, so [relFrom_, relTo_) is consumed;
    // the page holding relTo_ is shared with the next (posted) buffer and waits.
    void releaseConsumed() noexcept
    {
        try {
            if (relTo_ > relFrom_)
                release_(relFrom_, relTo_ - relFrom_);
        } catch (const std::exception& e) {
            NPF_WARN_RL("npf-bench: release: %s", e.what());
        }
        relFrom_ = relTo_ & ~uint64_t(NPF_PAGE_SIZE - 1);
    }

    const RxConfig& cfg_;
    Flow& flow_;
    const uint8_t* region_;
    Release release_;
    uint64_t relFrom_ = 0, relTo_ = 0, next_ = 0;
};

} // namespace npf::bench
