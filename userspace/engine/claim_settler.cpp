#include "engine/claim_settler.h"

#include "sys/log.h"

namespace npf {

void ClaimSettler::step(SettleSource& src) noexcept
{
    switch (state_) {
    case State::Idle:
        if (!src.sample() || !src.requestGrace(&ticket_))
            return;
        state_ = State::Barrier;
        return;
    case State::Barrier:
        if (!src.graceOver(ticket_))
            return;
        src.markRings();
        state_ = State::Drain;
        [[fallthrough]];
    case State::Drain:
        if (!src.ringsReleased())
            return;
        src.settle();
        state_ = State::Idle;
        return;
    }
}

FlowSettleSource::FlowSettleSource(FlowTable& flows, const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues,
                                   GracePeriods& grace)
    : flows_(flows), queues_(queues), grace_(grace)
{
    marks_.reserve(queues.size());
}

bool FlowSettleSource::sample() noexcept
{
    bool pending = false;
    flows_.forEach([&](ServedFlow& f) {
        f.sampled = f.posts.consumed();
        pending |= f.sampled != f.settled.load(std::memory_order_relaxed);
    });
    return pending;
}

bool FlowSettleSource::requestGrace(uint64_t* ticket) noexcept
{
    try {
        *ticket = grace_.request();
        return true;
    } catch (const std::exception& e) { // std::system_error from the mutex
        NPF_WARN_RL("npf pager: requesting a grace period: %s", e.what());
        return false;
    }
}

void FlowSettleSource::markRings() noexcept
{
    marks_.clear();
    for (auto& q : queues_)
        marks_.push_back(q->rxMark());
}

bool FlowSettleSource::ringsReleased() const noexcept
{
    for (size_t i = 0; i < queues_.size(); i++)
        if (!queues_[i]->releasedPast(marks_[i]))
            return false;
    return true;
}

void FlowSettleSource::settle() noexcept
{
    flows_.forEach([](ServedFlow& f) { f.settled.store(f.sampled, std::memory_order_release); });
}

} // namespace npf
