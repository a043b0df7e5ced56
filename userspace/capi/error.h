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

// Keeps `msg` as this thread's last failure, sets errno to err; returns -err.
int fail(int err, const char* msg) noexcept;
int fail(int err, const std::string& msg) noexcept;

// errno as a C API call leaves it: its errno (-rc) when it failed, the
// caller's own (`saved`, read on entry) when it succeeded, whatever system
// calls libnpf made on the way (an EINTR retried, an EAGAIN polled).
template <typename R>
R settle(int saved, R rc) noexcept
{
    errno = rc < 0 ? static_cast<int>(-rc) : saved;
    return rc;
}

// For the calls that cannot fail (void, a no-op on NULL): the caller's errno
// is restored on the way out.
class KeepErrno {
public:
    KeepErrno() noexcept : saved_(errno) {}
    ~KeepErrno() { errno = saved_; }
    KeepErrno(const KeepErrno&) = delete;
    KeepErrno& operator=(const KeepErrno&) = delete;

private:
    int saved_;
};

// The errno a std::system_error stands for (EIO if its category is not errno's).
int errnoOf(const std::system_error& e) noexcept;

// Runs `body` (which returns 0, a count or a negative errno) and turns what it
// throws into a negative errno with its message: std::system_error its code,
// std::invalid_argument -EINVAL, std::bad_alloc -ENOMEM, anything else -EIO.
// errno is then settle()d: the result's, or the caller's on success.
template <typename Body>
auto guarded(Body&& body) noexcept -> decltype(body())
{
    const int saved = errno;
    try {
        return settle(saved, body());
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
