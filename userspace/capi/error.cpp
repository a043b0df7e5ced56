#include "capi/error.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "npf/npf.h"

namespace npf::capi {
namespace {
thread_local std::string lastError;
} // namespace

int fail(int err, const char* msg) noexcept
{
    try {
        lastError.assign(msg);
    } catch (...) {
        lastError.clear(); // no room for the words: the errno still says it
    }
    errno = err; // last: nothing after it may change it
    return -err;
}

int fail(int err, const std::string& msg) noexcept { return fail(err, msg.c_str()); }

int errnoOf(const std::system_error& e) noexcept
{
    const std::error_category& cat = e.code().category();
    const int v = e.code().value();
    return (cat == std::generic_category() || cat == std::system_category()) && v > 0 ? v : EIO;
}

int copyMessage(const std::string& s, char* buf, size_t len) noexcept
{
    if (!buf && len > 0)
        return fail(EINVAL, "NULL buffer for the message");
    if (len > 0) {
        const size_t n = std::min(s.size(), len - 1);
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return static_cast<int>(std::min<size_t>(s.size(), INT_MAX));
}

} // namespace npf::capi

const char* npf_strerror_last(void) { return npf::capi::lastError.c_str(); }
