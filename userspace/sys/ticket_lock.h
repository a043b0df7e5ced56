// FIFO mutex (ticket lock parked on a futex through std::atomic::wait): the
// pager thread releases and re-takes the region lock in a loop, and a plain
// std::mutex can starve another caller (release(), evictAll()) for seconds.
#pragma once

#include <atomic>
#include <cstdint>

namespace npf {

class TicketLock {
public:
    void lock() noexcept
    {
        uint32_t t = next_.fetch_add(1, std::memory_order_relaxed);
        for (uint32_t s = serving_.load(std::memory_order_acquire); s != t;
             s = serving_.load(std::memory_order_acquire))
            serving_.wait(s, std::memory_order_acquire);
    }
    void unlock() noexcept
    {
        serving_.fetch_add(1, std::memory_order_release);
        if (next_.load(std::memory_order_relaxed) != serving_.load(std::memory_order_relaxed))
            serving_.notify_all();
    }

private:
    std::atomic<uint32_t> next_{0};
    std::atomic<uint32_t> serving_{0};
};

} // namespace npf
