// A flow's completion ring: npf_completion_ring header + entries in a sealed
// memfd, so another process (the application, a sidecar) can map it, plus an
// eventfd for blocking waits. Single producer (the service's publisher),
// single consumer (the application).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "npf/abi.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"

namespace npf {

struct CompletionRingStats {
    uint64_t pushed = 0;  // entries made visible by the producer (this mapping)
    uint64_t full = 0;    // producer calls that found no room
    uint64_t wakeups = 0; // eventfd signals sent (only when the consumer was waiting)
    uint64_t badCons = 0; // producer found the consumer's cursor out of range (wrote nothing)
    uint64_t badProd = 0; // consumer found the producer's cursor out of range (read nothing)
};

class CompletionRing {
public:
    // Creates a ring of `entries` (a power of two, >= 2) in a new memfd;
    // `name` names the memfd and appears in errors.
    static CompletionRing create(uint32_t entries, const std::string& name);
    // Maps an existing ring (fds received from its creator); validates the
    // header against the file size. Takes ownership of both fds.
    static CompletionRing attach(Fd memfd, Fd eventFd, const std::string& name);

    CompletionRing(CompletionRing&&) noexcept = default;
    CompletionRing& operator=(CompletionRing&&) noexcept = default;
    CompletionRing(const CompletionRing&) = delete;
    CompletionRing& operator=(const CompletionRing&) = delete;

    // --- producer ------------------------------------------------------------

    // Free entries (0 when full or when the consumer's cursor is corrupt).
    size_t room() noexcept;
    // Appends the first min(batch.size(), room()) entries, publishes them with
    // one release store and wakes a waiting consumer. Returns entries written;
    // fewer than batch.size() means back-pressure (counted `full`), nothing
    // is overwritten.
    size_t write(std::span<const npf_completion> batch) noexcept;
    bool push(const npf_completion& c) noexcept { return write({&c, 1}) == 1; }

    // True while the consumer is (about to be) asleep on the eventfd.
    bool consumerWaiting() const noexcept;

    // --- consumer ------------------------------------------------------------

    // Copies up to max ready entries to out, frees them; never blocks.
    size_t poll(size_t max, npf_completion* out) noexcept;
    // Entries ready now, without consuming.
    size_t ready() noexcept { return ready(std::memory_order_acquire); }
    // Blocks until an entry is ready or timeout passes (negative = forever).
    // Returns entries ready (> 0), 0 on timeout, -EPROTO on a corrupt
    // producer cursor, or another -errno from poll(2).
    int wait(std::chrono::milliseconds timeout) noexcept;

    // --- both ----------------------------------------------------------------

    int memfd() const noexcept { return memfd_.get(); }
    int eventFd() const noexcept { return eventFd_.get(); }
    uint32_t size() const noexcept { return size_; }
    CompletionRingStats stats() const noexcept;
    // Bytes of the mapping for a ring of `entries`.
    static size_t mappingSize(uint32_t entries) noexcept;

private:
    CompletionRing(Fd memfd, Fd eventFd, MmapArea map, uint32_t size) noexcept;
    size_t ready(std::memory_order order) noexcept;
    npf_completion_ring* hdr() const noexcept { return map_.as<npf_completion_ring>(); }
    npf_completion* entries() const noexcept
    {
        return reinterpret_cast<npf_completion*>(map_.as<char>() + sizeof(npf_completion_ring));
    }

    Fd memfd_;
    Fd eventFd_;
    MmapArea map_;
    uint32_t size_ = 0; // cached: the shared header is writable by the other side
    uint64_t prod_ = 0; // producer's copy of hdr->prod
    uint64_t cons_ = 0; // consumer's copy of hdr->cons
    // Each counter has one writer (producer or consumer side); relaxed
    // atomics so stats() may be read from any thread.
    struct Counters {
        std::atomic<uint64_t> pushed{0}, full{0}, wakeups{0}, badCons{0}, badProd{0};
    };
    std::unique_ptr<Counters> stats_ = std::make_unique<Counters>();
};

} // namespace npf
