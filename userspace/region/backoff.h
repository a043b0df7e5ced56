// Bounded retry of an ioctl that returns -EAGAIN. UFFDIO_COPY and
// UFFDIO_CONTINUE do while the target mm is changing (a non-cooperative event
// not yet read, a fork or a remap under way): it clears when another thread
// finishes, so retrying at once mostly burns the CPU that thread needs.
// A few tries yield the CPU, later ones sleep, doubling, and after kTries the
// caller gives up and reports -EAGAIN (the page faults again, or the next
// batch tries it again); about 1.3 ms in all.
#pragma once

#include <sched.h>
#include <time.h>

namespace npf {

class Backoff {
public:
    static constexpr unsigned kTries = 10;  // retries after the first attempt
    static constexpr unsigned kYields = 3;  // of them, the ones that only yield
    static constexpr long kFirstSleepNs = 10'000;
    static_assert(kTries - kYields < 12, "the last sleep stays in the tens of milliseconds at most");

    // Waits before the next retry; false (without waiting) when the retries are spent.
    bool again() noexcept
    {
        if (tries_ >= kTries)
            return false;
        if (tries_ < kYields) {
            ::sched_yield();
        } else {
            timespec ts{0, kFirstSleepNs << (tries_ - kYields)};
            ::nanosleep(&ts, nullptr);
        }
        ++tries_;
        return true;
    }
    unsigned tries() const noexcept { return tries_; }

private:
    unsigned tries_ = 0;
};

} // namespace npf
