// The regions a service serves: a pager polls each one's userfaultfd(s)
// for CPU faults. Control threads add and remove; the pagers take a
// snapshot when the generation moves. A removed region may still be in a
// pager's snapshot until its next round: the owner waits for that
// (Pager::sync) before destroying the region. Each region gets a serial when
// added, which says which pager serves it (PagerShard::regionOwner).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace npf {

class Region;

class RegionSet {
public:
    struct Entry {
        Region* region;
        uint64_t serial; // 0, 1, 2, ... in the order of add()
    };
    void add(Region* r)
    {
        std::lock_guard<std::mutex> lock(mu_);
        regions_.push_back({r, next_++});
        gen_.fetch_add(1, std::memory_order_release);
    }
    void remove(Region* r) noexcept
    {
        std::lock_guard<std::mutex> lock(mu_);
        std::erase_if(regions_, [r](const Entry& e) { return e.region == r; });
        gen_.fetch_add(1, std::memory_order_release);
    }
    uint64_t generation() const noexcept { return gen_.load(std::memory_order_acquire); }
    // Copies the set into `out` (whose capacity the caller keeps); returns its generation.
    uint64_t snapshot(std::vector<Entry>& out) const
    {
        std::lock_guard<std::mutex> lock(mu_);
        out.assign(regions_.begin(), regions_.end());
        return gen_.load(std::memory_order_relaxed);
    }
    template <typename F>
    void forEach(F&& fn) const
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const Entry& e : regions_)
            fn(*e.region);
    }

private:
    mutable std::mutex mu_;
    std::vector<Entry> regions_;
    uint64_t next_ = 0; // under mu_
    std::atomic<uint64_t> gen_{0};
};

} // namespace npf
