// The C API's error convention: a negative errno returned, the words for it
// kept per thread for npf_strerror_last(), and no C++ exception crossing
// into C.
#pragma once

#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

namespace npf::capi {

// Keeps `msg` as this thread's last failure; returns -err.
int fail(int err, const char* msg) noexcept;
int fail(int err, const std::string& msg) noexcept;

// The errno a std::system_error stands for (EIO if its category is not errno's).
int errnoOf(const std::system_error& e) noexcept;

// Runs `body` (which returns 0, a count or a negative errno) and turns what it
// throws into a negative errno with its message: std::system_error its code,
// std::invalid_argument -EINVAL, std::bad_alloc -ENOMEM, anything else -EIO.
template <typename Body>
auto guarded(Body&& body) noexcept -> decltype(body())
{
    try {
        return body();
    } catch (const std::system_error& e) {
        return fail(errnoOf(e), e.what());
    } catch (const std::invalid_argument& e) {
        return fail(EINVAL, e.what());
    } catch (const std::bad_alloc&) {
        return fail(ENOMEM, "out of memory");
    } catch (const std::exception& e) {
        return fail(EIO, e.what());
    } catch (...) {
        return fail(EIO, "unknown C++ exception inside libnpf");
    }
}

// Copies `s` into buf[len] like snprintf; its length (at most INT_MAX), or
// -EINVAL for a NULL buf with len > 0.
int copyMessage(const std::string& s, char* buf, size_t len) noexcept;

} // namespace npf::capi
