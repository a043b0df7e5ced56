// Application side of an end-to-end test: posts buffers on a flow, polls its
// completions and checks each one: strictly consecutive seqs, the offset of
// the buffer that seq consumed, the status and length the datagram calls for,
// and every byte in the region against what the sender sent. Bytes can be
// checked at once or later (lag), to read buffers the pager may have evicted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <gtest/gtest.h>
#include <string>
#include <unordered_map>
#include <vector>

#include "npf/engine.h"
#include "wait.h"

namespace npf::e2e {

struct BufferPlan {
    uint64_t base = 0;
    uint64_t stride = 2048;  // offset of post p: base + (p % slots) * stride
    uint64_t slots = 0;      // 0 = as many as the region holds
    uint32_t depth = 1024;   // posts outstanding
    std::function<uint32_t(uint64_t p)> len = [](uint64_t) { return 2048u; };
};

struct CheckTotals {
    uint64_t completions = 0, ok = 0, truncated = 0, lost = 0, badCsum = 0, faultFlag = 0, verified = 0;
    uint64_t failures = 0;
    std::string firstFailures; // the first few, one per line
};

class Checker {
public:
    // sizeOf: payload size of datagram `id`. Datagrams are identified by
    // their header. seqIsIndex: datagram k of sender 0 must have consumed seq
    // start + k (one in-order sender, no loss), which also identifies
    // datagrams shorter than the header.
    Checker(Engine& eng, Flow& flow, BufferPlan plan, std::function<uint32_t(uint32_t id)> sizeOf,
            bool seqIsIndex = false);

    void postInitial();
    // Polls until `total` completions arrived (true), or none arrived for
    // `deadline` (false: a failure bound, never waited out by a passing test). Bytes are verified once more than `lag`
    // completions followed.
    bool pumpUntil(uint64_t total, size_t lag = 0, std::chrono::milliseconds deadline = test::kDeadline);
    // Polls until `settled()` holds while no completion is ready (every
    // datagram sent is accounted for: nothing more can complete), or
    // `deadline` passed (false).
    bool pumpUntilSettled(const std::function<bool()>& settled, size_t lag = 0,
                          std::chrono::milliseconds deadline = test::kDeadline);
    // One poll without blocking: whatever is ready now.
    void pumpReady(size_t lag = 0);
    void verifyPending(size_t keep = 0);

    // Flow control for a Sender of this flow (SendPlan::window, ::done):
    // completions polled whose buffers are posted again and visible to XDP.
    // `senders` sharing the flow each get done() / senders: together they
    // keep fewer than senders * window datagrams in flight.
    uint32_t window(uint32_t want = 128) const;
    uint64_t doneCount() const { return done_.load(std::memory_order_acquire); }
    std::function<uint64_t()> done(uint32_t senders = 1) const
    {
        return [this, senders] { return doneCount() / senders; };
    }

    const CheckTotals& totals() const { return t_; }
    uint64_t startSeq() const { return start_; }
    // Offset and posted length of the buffer of post p.
    uint64_t offsetOf(uint64_t p) const { return plan_.base + (p % plan_.slots) * plan_.stride; }
    // id -> count of completions that carried it (duplicates show as 2+).
    const std::unordered_map<uint32_t, uint32_t>& ids() const { return ids_; }
    // ids in completion order (to check per-sender order).
    const std::vector<uint32_t>& order() const { return order_; }
    // Every sender's ids strictly increase in completion order.
    ::testing::AssertionResult inSendOrder() const;
    // Verifies the bytes of one completion (region read; may CPU-fault).
    bool verify(const npf_completion& c);

private:
    void fail(const std::string& msg);
    void handle(const npf_completion& c);
    void repost();
    size_t pumpOnce(std::chrono::milliseconds wait, size_t lag);

    Engine& eng_;
    Flow& flow_;
    BufferPlan plan_;
    std::function<uint32_t(uint32_t)> sizeOf_;
    bool seqIsIndex_;
    uint64_t posted_ = 0;
    uint64_t start_ = 0;
    bool started_ = false;
    std::vector<npf_completion> pending_;
    size_t pendingHead_ = 0;
    std::unordered_map<uint32_t, uint32_t> ids_;
    std::vector<uint32_t> order_;
    std::vector<uint32_t> postedLen_;
    CheckTotals t_;
    std::atomic<uint64_t> done_{0};
};

} // namespace npf::e2e
