// Tests wait on events, never on time: a condition polled until it holds,
// under a deadline generous enough for a loaded 2-vCPU CI machine. The
// deadline only bounds a failure; a passing test never waits it out.
#pragma once

#include <chrono>
#include <thread>

namespace npf::test {

// For anything that takes milliseconds on an idle machine.
inline constexpr std::chrono::milliseconds kDeadline{30000};

// Polls `done` every `step` until it returns true (then true) or `deadline`
// passed (then its last answer).
template <class Pred>
bool waitUntil(Pred&& done, std::chrono::milliseconds deadline = kDeadline,
               std::chrono::microseconds step = std::chrono::milliseconds(1))
{
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= end)
            return done();
        std::this_thread::sleep_for(step);
    }
    return true;
}

} // namespace npf::test
