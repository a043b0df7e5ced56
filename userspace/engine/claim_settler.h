// When is a claimed seq that never arrived LOST? XDP claims a seq (CAS on
// the cursor's cons) and puts the frame into an AF_XDP ring in the same
// softirq run: the ring's producer index is published by xdp_do_flush at the
// end of that NAPI poll, which can be milliseconds later on a loaded (or
// preempted) CPU. A softirq run is an RCU read-side critical section, so once
// an RCU grace period that started after cons was read is over, every seq
// below it is in a ring or was dropped. Once the rings have released every
// frame produced by then (a ring's consumer index moves only after the
// batch's seqs were claimed in the sequencer), a seq below the sample that
// is still unclaimed was dropped: settled moves to the sample and the
// sequencer may complete it LOST. No timeout decides this.
//
// ClaimSettler is that proof as a state machine, one step a pager round
// (the lead's), over a SettleSource: the engine's flows, grace periods and
// rings (FlowSettleSource), or a test's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/flow_table.h"
#include "engine/grace_period.h"
#include "xsk/queue.h"

namespace npf {

class SettleSource {
public:
    virtual ~SettleSource() = default;
    // Every flow: sample its cons. True if a sample is ahead of what is settled.
    virtual bool sample() noexcept = 0;
    // A grace period that starts now; false if none could be requested.
    virtual bool requestGrace(uint64_t* ticket) noexcept = 0;
    virtual bool graceOver(uint64_t ticket) const noexcept = 0;
    // Marks every RX ring's producer index now.
    virtual void markRings() noexcept = 0;
    // Every ring has released past its mark.
    virtual bool ringsReleased() const noexcept = 0;
    // Every flow: settled = its sample.
    virtual void settle() noexcept = 0;
};

class ClaimSettler {
public:
    enum class State { Idle, Barrier, Drain };
    void step(SettleSource& src) noexcept;
    State state() const noexcept { return state_; }

private:
    State state_ = State::Idle;
    uint64_t ticket_ = 0;
};

// The engine's: its flows' cursors, the lead pager's grace periods, the
// service's RX rings.
class FlowSettleSource final : public SettleSource {
public:
    FlowSettleSource(FlowTable& flows, const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues,
                     GracePeriods& grace);
    bool sample() noexcept override;
    bool requestGrace(uint64_t* ticket) noexcept override;
    bool graceOver(uint64_t ticket) const noexcept override { return grace_.over(ticket); }
    void markRings() noexcept override;
    bool ringsReleased() const noexcept override;
    void settle() noexcept override;

private:
    FlowTable& flows_;
    const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues_;
    GracePeriods& grace_;
    std::vector<xsk::QueueSockets::RxMark> marks_;
};

} // namespace npf
