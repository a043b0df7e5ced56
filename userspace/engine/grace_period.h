// RCU grace periods for the pager, waited for on a thread of their own (one
// takes milliseconds; the pager must not block). membarrier(
// MEMBARRIER_CMD_GLOBAL) is synchronize_rcu(): once it returns, every XDP run
// (an RCU read-side section) that started before the request has finished.
// Where the kernel refuses it (nohz_full), a fixed wait stands in: long
// enough for any softirq run, never a proof.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace npf {

class GracePeriods {
public:
    // onDone runs on the grace-period thread after each one (to wake the pager).
    explicit GracePeriods(std::function<void()> onDone);
    ~GracePeriods();
    GracePeriods(const GracePeriods&) = delete;
    GracePeriods& operator=(const GracePeriods&) = delete;

    // Starts a grace period after every one requested so far; returns its ticket.
    uint64_t request();
    // The grace period of `ticket` (and every earlier one) is over.
    bool over(uint64_t ticket) const noexcept { return done_.load(std::memory_order_acquire) >= ticket; }

private:
    void loop() noexcept;

    std::function<void()> onDone_;
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t requested_ = 0; // under mu_
    bool stop_ = false;      // under mu_
    std::atomic<uint64_t> done_{0};
    std::thread thread_; // last: starts after the members above exist
};

} // namespace npf
