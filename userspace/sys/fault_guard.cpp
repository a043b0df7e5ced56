#include "sys/fault_guard.h"

#include <signal.h>

#include <mutex>

namespace npf::fault_guard_detail {

namespace {

// The disposition before ours: a SIGBUS that is not a guarded call's goes there.
struct sigaction previous{};

void restoreAndReturn(int sig) noexcept
{
    // A fault raised by an instruction comes back as soon as the handler
    // returns: with the default action back, it ends the process as it
    // would have without us.
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
}

void onSigbus(int sig, siginfo_t* si, void* uc)
{
    const uintptr_t a = reinterpret_cast<uintptr_t>(si->si_addr);
    for (Frame* f = current(); f; f = f->prev)
        if (a >= f->lo && a < f->hi) {
            f->addr = a;
            siglongjmp(f->env, 1);
        }
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    restoreAndReturn(sig);
}

} // namespace

std::atomic<bool> installed{false};

Frame*& current() noexcept
{
    static thread_local Frame* frame [[gnu::tls_model("initial-exec")]] = nullptr;
    return frame;
}

void installHandler() noexcept
{
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa{};
        sa.sa_sigaction = onSigbus;
        // SA_NODEFER: SIGBUS stays unblocked after the siglongjmp out of the
        // handler (sigsetjmp saved no mask, to stay free of system calls).
        sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
        ::sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, &previous);
        installed.store(true, std::memory_order_release);
    });
}

} // namespace npf::fault_guard_detail
