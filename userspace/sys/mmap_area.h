// Move-only owner of an mmap()ed range.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <string>
#include <utility>

#include "sys/error.h"

namespace npf {

class MmapArea {
public:
    MmapArea() noexcept = default;
    MmapArea(void* addr, size_t len) noexcept : addr_(addr), len_(len) {}
    MmapArea(MmapArea&& o) noexcept
        : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0))
    {
    }
    MmapArea& operator=(MmapArea&& o) noexcept
    {
        if (this != &o) {
            reset();
            addr_ = std::exchange(o.addr_, nullptr);
            len_ = std::exchange(o.len_, 0);
        }
        return *this;
    }
    MmapArea(const MmapArea&) = delete;
    MmapArea& operator=(const MmapArea&) = delete;
    ~MmapArea() { reset(); }

    // mmap() or throw naming `what`.
    static MmapArea map(size_t len, int prot, int flags, int fd, off_t off, const std::string& what)
    {
        void* p = ::mmap(nullptr, len, prot, flags, fd, off);
        if (p == MAP_FAILED)
            throwErrno("mmap " + what);
        return MmapArea(p, len);
    }

    void* get() const noexcept { return addr_; }
    template <typename T>
    T* as() const noexcept { return static_cast<T*>(addr_); }
    size_t size() const noexcept { return len_; }
    explicit operator bool() const noexcept { return addr_ != nullptr; }
    // Gives up ownership: the caller unmaps.
    void* release() noexcept
    {
        len_ = 0;
        return std::exchange(addr_, nullptr);
    }
    void reset() noexcept
    {
        if (addr_)
            ::munmap(addr_, len_);
        addr_ = nullptr;
        len_ = 0;
    }

private:
    void* addr_ = nullptr;
    size_t len_ = 0;
};

} // namespace npf
