// Userspace views of the four rings an AF_XDP socket shares with the kernel
// (fill, completion, RX, TX). Each view has exactly one userspace user at a
// time; the kernel is the other side.
//
// Ordering (mirrors the kernel's A..D barriers in net/xdp/xsk_queue.h):
//  - producer side: write the slots, then store-release the producer index;
//    refresh the cached consumer index with a load-acquire so the kernel has
//    finished reading the slots we are about to overwrite;
//  - consumer side: load-acquire the producer index before reading slots,
//    store-release the consumer index after we are done reading them.
#pragma once

#include <linux/if_xdp.h>

#include <atomic>
#include <cstdint>

namespace npf::xsk {

// Addresses of one mmapped ring (from XDP_MMAP_OFFSETS).
struct RingPtrs {
    uint32_t* producer = nullptr;
    uint32_t* consumer = nullptr;
    uint32_t* flags = nullptr;
    void* descs = nullptr;
    uint32_t size = 0; // entries, a power of two
};

namespace detail {
inline uint32_t loadAcquire(uint32_t* p) noexcept
{
    return std::atomic_ref<uint32_t>(*p).load(std::memory_order_acquire);
}
inline void storeRelease(uint32_t* p, uint32_t v) noexcept
{
    std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
}

// What either end of a ring keeps: its pointers and cached copies of both
// shared indexes, read when the view is made.
class RingView {
public:
    uint32_t size() const noexcept { return p_.size; }

protected:
    RingView() noexcept = default;
    explicit RingView(const RingPtrs& p) noexcept
        : p_(p), mask_(p.size - 1), cachedProd_(loadAcquire(p.producer)), cachedCons_(loadAcquire(p.consumer))
    {
    }

    RingPtrs p_;
    uint32_t mask_ = 0;
    uint32_t cachedProd_ = 0;
    uint32_t cachedCons_ = 0;
};
} // namespace detail

// Ring userspace produces into (fill ring of u64 frame addresses).
class ProdRing : public detail::RingView {
public:
    ProdRing() noexcept = default;
    explicit ProdRing(const RingPtrs& p) noexcept : RingView(p) {}

    // Free slots, refreshing the consumer index only if fewer than `want` are known free.
    uint32_t freeSlots(uint32_t want) noexcept
    {
        uint32_t f = p_.size - (cachedProd_ - cachedCons_);
        if (f >= want)
            return f;
        cachedCons_ = detail::loadAcquire(p_.consumer);
        return p_.size - (cachedProd_ - cachedCons_);
    }
    // Entries the kernel has not consumed yet (it publishes its consumer
    // index lazily, so this can overstate what it still holds).
    uint32_t queued() noexcept
    {
        cachedCons_ = detail::loadAcquire(p_.consumer);
        return cachedProd_ - cachedCons_;
    }
    // Slot i after the current producer index; valid for i < freeSlots().
    uint64_t& addrAt(uint32_t i) noexcept
    {
        return static_cast<uint64_t*>(p_.descs)[(cachedProd_ + i) & mask_];
    }
    void submit(uint32_t n) noexcept
    {
        cachedProd_ += n;
        detail::storeRelease(p_.producer, cachedProd_);
    }
    bool needsWakeup() const noexcept
    {
        return std::atomic_ref<uint32_t>(*p_.flags).load(std::memory_order_relaxed) & XDP_RING_NEED_WAKEUP;
    }
};

// Ring userspace consumes from (RX ring of xdp_desc; the completion ring would be ConsRing<uint64_t>).
template <typename Desc>
class ConsRing : public detail::RingView {
public:
    ConsRing() noexcept = default;
    explicit ConsRing(const RingPtrs& p) noexcept : RingView(p) {}

    // Up to `max` available entries; *first gets the index of the first one.
    uint32_t peek(uint32_t max, uint32_t* first) noexcept
    {
        uint32_t avail = cachedProd_ - cachedCons_;
        if (avail < max) {
            cachedProd_ = detail::loadAcquire(p_.producer);
            avail = cachedProd_ - cachedCons_;
        }
        *first = cachedCons_;
        return avail < max ? avail : max;
    }
    const Desc& at(uint32_t idx) const noexcept { return static_cast<const Desc*>(p_.descs)[idx & mask_]; }
    // Gives the first n peeked slots back to the kernel.
    void release(uint32_t n) noexcept
    {
        cachedCons_ += n;
        detail::storeRelease(p_.consumer, cachedCons_);
    }
    // Entries produced but not released, from the shared indexes only: safe
    // to call from a thread other than the consumer.
    uint32_t backlog() const noexcept
    {
        return detail::loadAcquire(p_.producer) - detail::loadAcquire(p_.consumer);
    }
    // The shared indexes themselves (any thread): everything produced before
    // producedIndex() was read is released once consumedIndex() passes it.
    uint32_t producedIndex() const noexcept { return detail::loadAcquire(p_.producer); }
    uint32_t consumedIndex() const noexcept { return detail::loadAcquire(p_.consumer); }
};

using RxRing = ConsRing<xdp_desc>;

} // namespace npf::xsk
