// Zero-initialised array in an anonymous MAP_NORESERVE mapping: only the parts
// that are touched cost memory, so per-page tables of a 64 GiB region are cheap.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sys/mmap_area.h"

namespace npf {

template <typename T>
class LazyArray {
public:
    LazyArray() noexcept = default;
    LazyArray(size_t n, const std::string& what)
        : area_(MmapArea::map(bytes(n), PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, what)),
          n_(n)
    {
    }

    T* data() const noexcept { return area_.as<T>(); }
    T& operator[](size_t i) const noexcept { return area_.as<T>()[i]; }
    size_t size() const noexcept { return n_; }

    // Gives the memory of the whole array back to the kernel (contents become zero).
    void clear() noexcept
    {
        if (area_)
            ::madvise(area_.get(), area_.size(), MADV_DONTNEED);
    }

private:
    static size_t bytes(size_t n)
    {
        size_t b = (n ? n : 1) * sizeof(T);
        return (b + 4095) & ~size_t(4095);
    }

    MmapArea area_;
    size_t n_ = 0;
};

// Bit helpers over 64-bit words; atomic where other threads read or write.
namespace bits {

inline bool test(const uint64_t* w, uint64_t i) noexcept
{
    return (w[i >> 6] >> (i & 63)) & 1;
}
inline void set(uint64_t* w, uint64_t i) noexcept { w[i >> 6] |= 1ull << (i & 63); }
inline void clear(uint64_t* w, uint64_t i) noexcept { w[i >> 6] &= ~(1ull << (i & 63)); }

inline bool testAcquire(const uint64_t* w, uint64_t i) noexcept
{
    return (__atomic_load_n(&w[i >> 6], __ATOMIC_ACQUIRE) >> (i & 63)) & 1;
}
inline void setAtomic(uint64_t* w, uint64_t i, int order) noexcept
{
    __atomic_fetch_or(&w[i >> 6], 1ull << (i & 63), order);
}
inline bool testAndClearAtomic(uint64_t* w, uint64_t i, int order) noexcept
{
    uint64_t m = 1ull << (i & 63);
    return __atomic_fetch_and(&w[i >> 6], ~m, order) & m;
}
inline void clearAtomic(uint64_t* w, uint64_t i, int order) noexcept
{
    __atomic_fetch_and(&w[i >> 6], ~(1ull << (i & 63)), order);
}

} // namespace bits
} // namespace npf
