// Stores (and loads) into memory another process can take away, without
// dying or waiting on it: a client's region memfd, which the client may
// punch at any time (npfd). npfd maps such memory registered with a
// userfaultfd in UFFD_FEATURE_SIGBUS mode, so a store to a page that is not
// mapped raises SIGBUS at once instead of waiting for a fault handler (which
// may be the very thread that waits for the storer), and a store that would
// allocate a huge page that cannot be had raises SIGBUS too. guarded()
// turns such a SIGBUS into a return value:
//
//     uintptr_t at;
//     if (!guarded([&] { std::memcpy(dst, src, n); }, &at))
//         ... the page at `at` was not there: hand the work to the pager
//
// Rules for `fn`: it may not throw, allocate, take a lock or hold anything
// with a destructor that must run (a SIGBUS leaves it by siglongjmp, part
// way through), and what it wrote before the fault stays written. A SIGBUS
// outside guarded() (or at an address outside the guard's range) is the
// process's previous disposition, as if the guard were not there.
#pragma once

#include <atomic>
#include <csetjmp>
#include <cstddef>
#include <cstdint>

namespace npf {

namespace fault_guard_detail {

struct Frame {
    sigjmp_buf env;
    uintptr_t lo = 0, hi = 0; // the addresses a SIGBUS may come from
    volatile uintptr_t addr = 0;
    Frame* prev = nullptr;
};
// The calling thread's innermost guarded() call (initial-exec TLS: the
// handler reads it, and must not allocate).
Frame*& current() noexcept;
void installHandler() noexcept;
extern std::atomic<bool> installed; // the handler is in place

} // namespace fault_guard_detail

// Installs the process's SIGBUS handler (once; any thread). guarded() calls
// it, but a program may call it at start to install it before its threads.
inline void installFaultGuard() noexcept
{
    if (!fault_guard_detail::installed.load(std::memory_order_acquire))
        fault_guard_detail::installHandler();
}

// Runs fn(); false if a store or load of it into [lo, hi) raised SIGBUS (the
// address in *at, if given); true if it ran to its end. Not inlined (it
// calls sigsetjmp, without saving the signal mask: no system call).
template <class Fn>
[[gnu::noinline]] bool guarded(const void* lo, size_t len, Fn&& fn, uintptr_t* at = nullptr) noexcept
{
    using fault_guard_detail::Frame;
    installFaultGuard();
    Frame f;
    f.lo = reinterpret_cast<uintptr_t>(lo);
    f.hi = f.lo + len;
    Frame*& cur = fault_guard_detail::current();
    f.prev = cur;
    if (sigsetjmp(f.env, 0) != 0) {
        fault_guard_detail::current() = f.prev;
        if (at)
            *at = f.addr;
        return false;
    }
    cur = &f;
    fn();
    cur = f.prev;
    return true;
}

} // namespace npf
