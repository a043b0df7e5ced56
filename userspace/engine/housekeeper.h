// The lead pager's housekeeping: the tick (every 500 ms: the stats
// snapshot), the interface's liveness, and how long the lead may sleep
// before a missing seq is due to time out.
#pragma once

#include <cstdint>

#include "engine/pager_context.h"

namespace npf {

class Housekeeper {
public:
    explicit Housekeeper(const PagerContext& ctx) : ctx_(ctx) {}

    // The tick when it is due, and with it the interface check. False once
    // the interface is gone: the gone hook ran and every application thread
    // blocked in Flow::wait woke (Engine::failure() says why).
    bool round(uint64_t nowNs) noexcept;
    // Until the next seq deadline; 1 ms while seqs claimed by XDP are not
    // yet published (a missing one is seen promptly); at most 100 ms.
    int timeoutMs(uint64_t nowNs) const noexcept;
    void lastTick() noexcept { ctx_.hooks.tick(); }
    // The longest any pager sleeps (the tick's resolution).
    static constexpr int kMaxSleepMs = 100;

private:
    bool socketGone(int fd) noexcept;

    const PagerContext& ctx_;
    uint64_t nextTick_ = 0;
};

} // namespace npf
