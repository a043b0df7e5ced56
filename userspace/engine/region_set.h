// The regions a service serves: the pager polls each one's userfaultfd(s)
// for CPU faults. Control threads add and remove; the pager takes a
// snapshot when the generation moves. A removed region may still be in the
// pager's snapshot until its next round: the owner waits for that
// (Pager::sync) before destroying the region.
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
    void add(Region* r)
    {
        std::lock_guard<std::mutex> lock(mu_);
        regions_.push_back(r);
        gen_.fetch_add(1, std::memory_order_release);
    }
    void remove(Region* r) noexcept
    {
        std::lock_guard<std::mutex> lock(mu_);
        std::erase(regions_, r);
        gen_.fetch_add(1, std::memory_order_release);
    }
    uint64_t generation() const noexcept { return gen_.load(std::memory_order_acquire); }
    // Copies the set into `out` (whose capacity the caller keeps); returns its generation.
    uint64_t snapshot(std::vector<Region*>& out) const
    {
        std::lock_guard<std::mutex> lock(mu_);
        out.assign(regions_.begin(), regions_.end());
        return gen_.load(std::memory_order_relaxed);
    }
    template <typename F>
    void forEach(F&& fn) const
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (Region* r : regions_)
            fn(*r);
    }

private:
    mutable std::mutex mu_;
    std::vector<Region*> regions_;
    std::atomic<uint64_t> gen_{0};
};

} // namespace npf
