// Primary datagrams whose page was evicted after XDP steered them: workers
// copy them out of the UMEM, the pager places them. Bounded and allocated
// up front, so a worker's noexcept path never allocates: two buffers, the
// workers fill one under the lock while the pager places the other.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "npf/abi.h"
#include "sys/mmap_area.h"

namespace npf {

class ServedFlow;

struct Deferred {
    ServedFlow* flow;
    uint64_t seq;
    uint64_t offset;
    uint64_t tstamp; // steered by XDP, CLOCK_MONOTONIC ns; 0 if XDP did not stamp it
    uint16_t status;
    uint32_t len;
    const uint8_t* bytes; // the payload, len bytes
};

class DeferredQueue {
public:
    // Up to `capacity` datagrams of up to `maxLen` bytes wait at a time.
    DeferredQueue(uint32_t capacity, uint32_t maxLen);

    // Any worker. Reserves room for d.len bytes, lets fill(dst) write them
    // (false = do not queue: the payload failed its checksum), queues d.
    // Returns 1 queued, 0 refused by fill, -ENOSPC when full (counted by the caller).
    template <typename Fill>
    int push(Deferred d, Fill&& fill) noexcept
    {
        if (d.len > maxLen_)
            return -ENOSPC;
        std::lock_guard<std::mutex> lock(mu_);
        Buffer& b = buf_[active_];
        if (b.count == capacity_)
            return -ENOSPC;
        uint8_t* dst = b.bytes.as<uint8_t>() + size_t(b.count) * maxLen_;
        if (!fill(dst))
            return 0;
        d.bytes = dst;
        b.items[b.count++] = d;
        return 1;
    }
    // The pager: everything queued so far, valid until the next take().
    std::span<const Deferred> take() noexcept
    {
        std::lock_guard<std::mutex> lock(mu_);
        Buffer& done = buf_[active_ ^ 1];
        done.count = 0;
        active_ ^= 1;
        Buffer& full = buf_[active_ ^ 1];
        return {full.items.get(), full.count};
    }

private:
    struct Buffer {
        std::unique_ptr<Deferred[]> items;
        MmapArea bytes; // capacity x maxLen, committed only where written
        uint32_t count = 0;
    };
    const uint32_t capacity_, maxLen_;
    std::mutex mu_;
    Buffer buf_[2];
    unsigned active_ = 0; // workers fill buf_[active_]; under mu_
};

inline DeferredQueue::DeferredQueue(uint32_t capacity, uint32_t maxLen) : capacity_(capacity), maxLen_(maxLen)
{
    // The payload slots are reserved, not committed (MAP_NORESERVE,
    // untouched): a queue sized for a whole post ring of jumbo datagrams
    // costs memory only for the datagrams a burst actually defers.
    for (Buffer& b : buf_) {
        b.items = std::make_unique<Deferred[]>(capacity);
        b.bytes = MmapArea::map(std::max<size_t>(size_t(capacity) * maxLen, 1), PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, "the deferred queue's payloads");
    }
}

} // namespace npf
