// The structs of npf/npf.h that start with `size_t sz` (the caller's sizeof):
// options read in, counters written out, across library and header versions.
//
// `first` is the struct's size in the first version of the C API; a caller
// may not pass less. A field added later goes at the end, after the options
// struct's last `size_t :0;` (and a marker of its own after it: npf/npf.h,
// "Versioned structs"), and `first` stays the old size at the call site
// (npf_engine_opts: offsetof its region_memory). The library's own sizeof(T)
// is where the check of a newer caller's tail starts: a field of a later
// version lies past it, never in this version's tail padding.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "capi/error.h"

namespace npf::capi {

// (Both build messages, which may throw std::bad_alloc: call them inside guarded().)

// Copies the caller's options into *out (zero-filled first, so the fields an
// older caller does not know are 0, their default). A larger struct (a newer
// header) is accepted when the tail this library does not know is all zero:
// an option it cannot honour is refused with -E2BIG.
template <typename T>
int readOptions(const T* in, T* out, size_t first, const char* what)
{
    if (!in)
        return fail(EINVAL, std::string(what) + " is NULL");
    if (in->sz < first)
        return fail(EINVAL, std::string(what) + ".sz is " + std::to_string(in->sz) + ", less than sizeof (" +
                                std::to_string(first) + "): set it to sizeof the struct");
    const auto* bytes = reinterpret_cast<const unsigned char*>(in);
    for (size_t i = sizeof(T); i < in->sz; i++)
        if (bytes[i])
            return fail(E2BIG, std::string(what) + " sets a field this libnpf does not know (byte " +
                                   std::to_string(i) + " of " + std::to_string(in->sz) + ")");
    *out = T{};
    std::memcpy(out, in, std::min(in->sz, sizeof(T)));
    return 0;
}

// Writes *from into the caller's struct of out->sz bytes: what both know, the
// rest of a larger one (a newer header) zeroed. out->sz stays the caller's.
template <typename T>
int writeCounters(const T& from, T* out, size_t first, const char* what)
{
    if (!out)
        return fail(EINVAL, std::string(what) + " is NULL");
    const size_t sz = out->sz;
    if (sz < first)
        return fail(EINVAL, std::string(what) + ".sz is " + std::to_string(sz) + ", less than sizeof (" +
                                std::to_string(first) + "): set it to sizeof the struct");
    auto* bytes = reinterpret_cast<unsigned char*>(out);
    std::memcpy(bytes, &from, std::min(sz, sizeof(T)));
    if (sz > sizeof(T))
        std::memset(bytes + sizeof(T), 0, sz - sizeof(T));
    out->sz = sz;
    return 0;
}

} // namespace npf::capi
