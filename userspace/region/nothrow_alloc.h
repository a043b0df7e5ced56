// Growing a vector without throwing (false on allocation failure): for the
// region's parts that run where an exception cannot go (the pager, noexcept paths).
#pragma once

#include <cerrno>
#include <cstdint>
#include <new>

namespace npf {

// Grows v to n elements without throwing; false on allocation failure.
template <typename V>
bool ensureSize(V& v, size_t n) noexcept
{
    try {
        v.resize(n);
        return true;
    } catch (const std::bad_alloc&) {
        return false;
    }
}

template <typename V, typename T>
bool pushBack(V& v, const T& x) noexcept
{
    try {
        v.push_back(x);
        return true;
    } catch (const std::bad_alloc&) {
        return false;
    }
}

} // namespace npf
