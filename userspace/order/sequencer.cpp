#include "order/sequencer.h"

#include <limits>

#include "sys/error.h"

namespace npf {

Sequencer::Sequencer(dataplane::PostSlots posts, SequencerConfig cfg)
    : posts_(posts),
      timeoutNs_(cfg.reorderTimeout.count() < 0 ? 0 : static_cast<uint64_t>(cfg.reorderTimeout.count())),
      slots_(std::make_unique<Slot[]>(kWindow)),
      head_(cfg.startSeq),
      maxClaimed_(cfg.startSeq)
{
    if (!posts_)
        throwErrno(EINVAL, "create sequencer: no post ring given");
    // Slot i starts empty for the one seq of [startSeq, startSeq + window) it holds.
    for (uint64_t i = 0; i < kWindow; ++i) {
        const uint64_t seq = cfg.startSeq + ((i - cfg.startSeq) & kMask);
        slots_[i].state.store(word(seq, kEmpty), std::memory_order_relaxed);
        slots_[i].doneNs = 0;
        slots_[i].len = 0;
        slots_[i].status = 0;
        slots_[i].flags = 0;
    }
}

// Records when seqs [maxClaimed_, claimedCons) were first seen claimed. The
// FIFO is bounded: when full, the newest epoch is stretched and re-stamped,
// which only moves deadlines later (never declares LOST early).
void Sequencer::noteClaimed(uint64_t nowNs, uint64_t claimedCons) noexcept
{
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (static_cast<int64_t>(claimedCons - (h + kWindow)) > 0)
        claimedCons = h + kWindow; // at most a window can be outstanding
    if (static_cast<int64_t>(claimedCons - maxClaimed_) <= 0)
        return;
    if (static_cast<int64_t>(maxClaimed_ - h) < 0)
        maxClaimed_ = h;
    if (epochCount_ == epochs_.size()) {
        Epoch& back = epochs_[(epochHead_ + epochCount_ - 1) % epochs_.size()];
        back.bound = claimedCons;
        back.seenNs = nowNs;
    } else {
        epochs_[(epochHead_ + epochCount_) % epochs_.size()] = {claimedCons, nowNs};
        ++epochCount_;
    }
    maxClaimed_ = claimedCons;
}

uint64_t Sequencer::lostDeadline(uint64_t seq) noexcept
{
    while (epochCount_ && static_cast<int64_t>(epochs_[epochHead_].bound - seq) <= 0) {
        epochHead_ = (epochHead_ + 1) % epochs_.size();
        --epochCount_;
    }
    if (!epochCount_)
        return std::numeric_limits<uint64_t>::max();
    const uint64_t seen = epochs_[epochHead_].seenNs;
    return seen > std::numeric_limits<uint64_t>::max() - timeoutNs_
               ? std::numeric_limits<uint64_t>::max()
               : seen + timeoutNs_;
}

uint64_t Sequencer::nextDeadline() const noexcept
{
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (static_cast<int64_t>(maxClaimed_ - h) <= 0 ||
        slots_[h & kMask].state.load(std::memory_order_acquire) != word(h, kEmpty))
        return std::numeric_limits<uint64_t>::max();
    for (size_t i = 0; i < epochCount_; ++i) {
        const Epoch& e = epochs_[(epochHead_ + i) % epochs_.size()];
        if (static_cast<int64_t>(e.bound - h) > 0)
            return e.seenNs > std::numeric_limits<uint64_t>::max() - timeoutNs_
                       ? std::numeric_limits<uint64_t>::max()
                       : e.seenNs + timeoutNs_;
    }
    return std::numeric_limits<uint64_t>::max();
}

void Sequencer::account(const npf_completion& c, uint64_t nowNs, uint64_t doneNs) noexcept
{
    switch (c.status) {
    case NPF_CS_OK: add(ok_, 1); break;
    case NPF_CS_TRUNCATED: add(truncated_, 1); break;
    case NPF_CS_BAD_CSUM: add(badCsum_, 1); break;
    default: add(lost_, 1); break;
    }
    if (c.flags & NPF_CF_FAULT)
        add(fault_, 1);
    if (doneNs && nowNs >= doneNs)
        latency_.recordSingleWriter(nowNs - doneNs);
}

SequencerStats Sequencer::stats() const noexcept
{
    auto ld = [](const Counter& c) { return c.load(std::memory_order_relaxed); };
    SequencerStats s;
    s.ok = ld(ok_);
    s.truncated = ld(truncated_);
    s.lost = ld(lost_);
    s.badCsum = ld(badCsum_);
    s.lostTimeout = ld(lostTimeout_);
    s.fault = ld(fault_);
    s.duplicates = ld(duplicates_);
    s.stale = ld(stale_);
    s.outOfWindow = ld(outOfWindow_);
    s.invalid = ld(invalid_);
    s.ringFull = ld(ringFull_);
    s.latency = latency_;
    return s;
}

} // namespace npf
