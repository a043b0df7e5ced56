// Futex words shared between processes (a MAP_SHARED mapping of one file:
// the kernel keys them by the file's page, not the address): a bounded wait
// and a wake. std::atomic::wait has no timeout and may use private futexes.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace npf {

// Sleeps while *word == expected, until `deadlineNs` (monotonicNs()) at
// the latest. Returns 0 (woken, or the word differed), -ETIMEDOUT or -EINTR.
inline int futexWaitUntil(uint32_t* word, uint32_t expected, uint64_t deadlineNs) noexcept
{
    const timespec deadline{static_cast<time_t>(deadlineNs / 1000000000), static_cast<long>(deadlineNs % 1000000000)};
    if (::syscall(SYS_futex, word, FUTEX_WAIT_BITSET, expected, &deadline, nullptr, FUTEX_BITSET_MATCH_ANY) == 0)
        return 0;
    return errno == EAGAIN ? 0 : -errno;
}

// Wakes every sleeper on `word`.
inline void futexWake(uint32_t* word) noexcept
{
    (void)::syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

} // namespace npf
