// Per-flow sequencer: workers and the pager mark seqs done in any order, from
// any thread; one publisher emits completions strictly in seq order, no gaps,
// no duplicates, and turns a seq that never arrives into NPF_CS_LOST after the
// reorder timeout so one loss never stalls the flow.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "dataplane/post_ring.h"
#include "npf/abi.h"
#include "sys/latency_histogram.h"

namespace npf {

// Where the publisher puts completions. room() is a lower bound of what
// write() accepts; write() gets at most room() entries and takes them all.
template <typename S>
concept CompletionSink = requires(S& s, std::span<const npf_completion> batch) {
    { s.room() } -> std::convertible_to<size_t>;
    s.write(batch);
};

struct SequencerConfig {
    uint64_t startSeq = 0; // first seq of the flow (the post ring's consumer index)
    std::chrono::nanoseconds reorderTimeout = std::chrono::milliseconds(1);
};

struct SequencerStats {
    // published, by status (lost includes lostTimeout)
    uint64_t ok = 0;
    uint64_t truncated = 0;
    uint64_t lost = 0;
    uint64_t badCsum = 0;
    uint64_t lostTimeout = 0; // LOST emitted because nothing arrived in time
    uint64_t fault = 0;       // published with NPF_CF_FAULT
    // rejected by claim()/markDone()
    uint64_t duplicates = 0;  // seq already claimed or done, not yet published
    uint64_t stale = 0;       // seq already published (late arrival after LOST, or a replay)
    uint64_t outOfWindow = 0; // seq not in [head, head + NPF_POST_RING_SIZE)
    uint64_t invalid = 0;     // bad status, or len longer than the posted buffer (clamped)
    // publisher
    uint64_t ringFull = 0;    // publish() calls that stopped with completions ready but no room
    // complete -> publish latency, ns (only when doneNs given)
    LatencyHistogram latency;

    // Sums (several flows, or flows that closed).
    SequencerStats& operator+=(const SequencerStats& o) noexcept
    {
        ok += o.ok, truncated += o.truncated, lost += o.lost, badCsum += o.badCsum;
        lostTimeout += o.lostTimeout, fault += o.fault, duplicates += o.duplicates, stale += o.stale;
        outOfWindow += o.outOfWindow, invalid += o.invalid, ringFull += o.ringFull;
        latency.merge(o.latency);
        return *this;
    }
};

class Sequencer {
public:
    static constexpr uint64_t kWindow = NPF_POST_RING_SIZE;

    // Result of claim(): rc 0 and the 64-bit seq, or rc -ERANGE (out of
    // window), -EALREADY (duplicate), -ESTALE (already published).
    struct Claim {
        int rc;
        uint64_t seq;
    };

    // posts: the flow's NPF_POST_RING_SIZE post descriptors (slot = seq & (size - 1)),
    // read at publish time for the completion's offset and to bound len. The
    // owner must not reuse a slot before its seq is published:
    // post producer - head() <= NPF_POST_RING_SIZE.
    explicit Sequencer(dataplane::PostSlots posts, SequencerConfig cfg = {});
    Sequencer(const Sequencer&) = delete;
    Sequencer& operator=(const Sequencer&) = delete;

    // --- any thread (workers, pager) ---------------------------------------

    // Takes ownership of seq32 (low 32 bits of the seq, from npf_meta.seq)
    // before its payload is written. Once claimed, the seq is never declared
    // LOST; a seq already declared LOST is refused (-ESTALE), so a late packet
    // is dropped instead of overwriting a buffer the application got back.
    Claim claim(uint32_t seq32) noexcept;
    // Finishes a successful claim; exactly one per claim (the slot stays
    // Busy until then and the flow waits for it). status NPF_CS_*; doneNs (CLOCK_MONOTONIC,
    // 0 = none) feeds the latency histogram.
    void complete(uint64_t seq, uint32_t len, uint16_t status, uint16_t flags,
                  uint64_t doneNs = 0) noexcept;
    // claim() + complete() in one call; 0 or claim's -errno, -EINVAL for a bad status.
    int markDone(uint32_t seq32, uint32_t len, uint16_t status, uint16_t flags,
                 uint64_t doneNs = 0) noexcept;

    // --- the publisher thread only -----------------------------------------

    // Emits ready completions in seq order into sink; returns how many.
    // claimedCons: the flow cursor's cons (every seq below it was claimed by
    // XDP); a missing seq below it becomes LOST once nowNs is reorderTimeout
    // past the first publish() call that saw it claimed. Stops without losing
    // anything when the sink is full (counted ringFull); call again later.
    template <CompletionSink S>
    size_t publish(uint64_t nowNs, uint64_t claimedCons, S& sink) noexcept;

    // Next seq to publish. Any thread.
    uint64_t head() const noexcept { return head_.load(std::memory_order_acquire); }
    // Earliest time at which publish() would emit a LOST for the current head,
    // or UINT64_MAX if nothing is pending (publisher thread: for its sleep).
    uint64_t nextDeadline() const noexcept;
    SequencerStats stats() const noexcept;

private:
    static constexpr uint64_t kMask = kWindow - 1;
    static constexpr unsigned kLapShift = __builtin_ctzll(kWindow);
    static constexpr size_t kBatch = 64;
    // Slot state word: (lap << 2) | state, lap = seq >> kLapShift. The lap
    // tags which seq of this slot the state is about, so a claim for seq s
    // cannot hit the slot after it was retired and reused for s + kWindow.
    enum : uint64_t { kEmpty = 0, kBusy = 1, kDone = 2 };
    static constexpr uint64_t word(uint64_t seq, uint64_t st) noexcept
    {
        return ((seq >> kLapShift) << 2) | st;
    }

    struct Slot {
        std::atomic<uint64_t> state;
        uint64_t doneNs;
        uint32_t len;
        uint16_t status;
        uint16_t flags;
    };
    struct Epoch {
        uint64_t bound; // seqs below bound (and above the previous bound) ...
        uint64_t seenNs; // ... were first seen claimed at seenNs
    };
    using Counter = std::atomic<uint64_t>;

    static void bump(Counter& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
    // Single-writer counter (publisher): no RMW needed.
    static void add(Counter& c, uint64_t n) noexcept
    {
        c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    void noteClaimed(uint64_t nowNs, uint64_t claimedCons) noexcept;
    uint64_t lostDeadline(uint64_t seq) noexcept;
    void account(const npf_completion& c, uint64_t nowNs, uint64_t doneNs) noexcept;

    const dataplane::PostSlots posts_;
    const uint64_t timeoutNs_;
    std::unique_ptr<Slot[]> slots_;

    alignas(64) std::atomic<uint64_t> head_;
    // Rejections, bumped by any thread (rare).
    alignas(64) Counter duplicates_{0}, stale_{0}, outOfWindow_{0}, invalid_{0};

    // Publisher-only state.
    alignas(64) uint64_t maxClaimed_;
    std::array<Epoch, 64> epochs_{};
    size_t epochHead_ = 0, epochCount_ = 0;
    Counter ok_{0}, truncated_{0}, lost_{0}, badCsum_{0}, lostTimeout_{0}, fault_{0}, ringFull_{0};
    LatencyHistogram latency_;
};

// ---- hot path, inline --------------------------------------------------------

inline Sequencer::Claim Sequencer::claim(uint32_t seq32) noexcept
{
    const uint64_t h = head_.load(std::memory_order_acquire);
    const uint32_t delta = seq32 - static_cast<uint32_t>(h);
    if (delta >= kWindow) {
        // Behind the head (as a signed 32-bit distance) is a replay or a late
        // arrival; anything else is ahead of the window (or garbage).
        if (static_cast<int32_t>(delta) < 0) {
            bump(stale_);
            return {-ESTALE, 0};
        }
        bump(outOfWindow_);
        return {-ERANGE, 0};
    }
    const uint64_t seq = h + delta;
    Slot& s = slots_[seq & kMask];
    uint64_t cur = word(seq, kEmpty);
    if (s.state.compare_exchange_strong(cur, word(seq, kBusy), std::memory_order_acquire,
                                        std::memory_order_relaxed))
        return {0, seq};
    // The slot's lap says what happened: same lap = claimed already; a later
    // lap = published and retired meanwhile; an earlier lap = the previous
    // seq of this slot is not retired yet, i.e. seq >= head + window.
    // Laps are (64 - kLapShift)-bit numbers: sign-extend their difference.
    const int64_t lapDiff =
        static_cast<int64_t>(((cur >> 2) - (seq >> kLapShift)) << kLapShift) >> kLapShift;
    if (lapDiff == 0) {
        bump(duplicates_);
        return {-EALREADY, 0};
    }
    if (lapDiff > 0) {
        bump(stale_);
        return {-ESTALE, 0};
    }
    bump(outOfWindow_);
    return {-ERANGE, 0};
}

inline void Sequencer::complete(uint64_t seq, uint32_t len, uint16_t status, uint16_t flags,
                                uint64_t doneNs) noexcept
{
    Slot& s = slots_[seq & kMask];
    if (status > NPF_CS_MAX) {
        bump(invalid_);
        status = NPF_CS_LOST;
    }
    s.len = status >= NPF_CS_LOST ? 0 : len; // LOST, BAD_CSUM: no valid bytes
    s.status = status;
    s.flags = flags;
    s.doneNs = doneNs;
    s.state.store(word(seq, kDone), std::memory_order_release);
}

inline int Sequencer::markDone(uint32_t seq32, uint32_t len, uint16_t status, uint16_t flags,
                               uint64_t doneNs) noexcept
{
    if (status > NPF_CS_MAX) {
        bump(invalid_);
        return -EINVAL;
    }
    const Claim c = claim(seq32);
    if (c.rc == 0)
        complete(c.seq, len, status, flags, doneNs);
    return c.rc;
}

template <CompletionSink S>
size_t Sequencer::publish(uint64_t nowNs, uint64_t claimedCons, S& sink) noexcept
{
    noteClaimed(nowNs, claimedCons);
    uint64_t h = head_.load(std::memory_order_relaxed);
    size_t total = 0;
    std::array<npf_completion, kBatch> batch;
    for (;;) {
        const size_t room = std::min<size_t>(sink.room(), kBatch);
        size_t n = 0;
        bool ready = false; // head is publishable but there was no room
        for (;;) {
            Slot& s = slots_[h & kMask];
            const uint64_t st = s.state.load(std::memory_order_acquire);
            npf_completion c;
            if (st == word(h, kDone)) {
                if (n == room) {
                    ready = true;
                    break;
                }
                const dataplane::Post post = posts_.at(h);
                c = {h, post.offset, s.len, s.status, s.flags};
                if (c.len > post.len) {
                    bump(invalid_);
                    c.len = post.len;
                }
                account(c, nowNs, s.doneNs);
                // Retire before the completion becomes visible: whoever learns
                // of it (and reposts the slot) finds the slot ready for h + window.
                s.state.store(word(h + kWindow, kEmpty), std::memory_order_release);
            } else if (st == word(h, kEmpty) && static_cast<int64_t>(maxClaimed_ - h) > 0 &&
                       nowNs >= lostDeadline(h)) {
                if (n == room) {
                    ready = true;
                    break;
                }
                // The CAS fences out a worker claiming h right now: either it
                // wins (we wait for its completion) or its claim sees -ESTALE.
                uint64_t exp = st;
                if (!s.state.compare_exchange_strong(exp, word(h + kWindow, kEmpty),
                                                     std::memory_order_acq_rel,
                                                     std::memory_order_relaxed))
                    continue;
                c = {h, posts_.at(h).offset, 0, NPF_CS_LOST, 0};
                add(lostTimeout_, 1);
                account(c, nowNs, 0);
            } else {
                break;
            }
            batch[n++] = c;
            ++h;
        }
        if (n) {
            head_.store(h, std::memory_order_release);
            sink.write(std::span<const npf_completion>(batch.data(), n));
            total += n;
        }
        if (ready && n == 0) {
            add(ringFull_, 1);
            return total;
        }
        if (!ready)
            return total;
    }
}

} // namespace npf
