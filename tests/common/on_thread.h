// Runs a function on a thread of its own, for what changes per-thread
// state (setns into a network namespace, a thread's own credentials) and
// must not leak into the test's thread.
#pragma once

#include <exception>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

namespace npf::test {

// fn() on a new thread, joined: its result, or its exception rethrown here.
template <typename F>
auto onThread(F&& fn) -> decltype(fn())
{
    using R = decltype(fn());
    std::exception_ptr err;
    if constexpr (std::is_void_v<R>) {
        std::thread([&] {
            try {
                fn();
            } catch (...) {
                err = std::current_exception();
            }
        }).join();
        if (err)
            std::rethrow_exception(err);
    } else {
        std::optional<R> out;
        std::thread([&] {
            try {
                out.emplace(fn());
            } catch (...) {
                err = std::current_exception();
            }
        }).join();
        if (err)
            std::rethrow_exception(err);
        return std::move(*out);
    }
}

} // namespace npf::test
