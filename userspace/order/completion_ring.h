// A flow's completion ring (shared memory) and its two sides.
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

// The shared memory of one flow's completion ring: an npf_completion_ring
// header + entries in a sealed memfd, so another process (the application, a
// sidecar) can map it, and a pipe for blocking waits (the notifier). Exactly
// one CompletionProducer (the service's publisher) and one CompletionConsumer
// (the application) use it, each through its own mapping or the same one;
// both must not outlive it.
//
// Why a pipe and not an eventfd: the consumer may be another, hostile process
// (an npfd client). File status flags live in the open file description, which
// every holder of an eventfd shares: a consumer could clear O_NONBLOCK and fill
// the counter, and the producer's next write() would block the service. A
// pipe's two ends are two open file descriptions: the consumer gets the read
// end only, the write end (O_NONBLOCK, one page of buffer) stays the
// producer's, so whatever the consumer does, a signal is sent or dropped
// (EAGAIN: one is pending anyway), never waited for.
class CompletionRing {
public:
    // Creates a ring of `entries` (a power of two, >= 2) in a new memfd;
    // `name` names the memfd and appears in errors.
    static CompletionRing create(uint32_t entries, const std::string& name);
    // Maps an existing ring (fds received from its creator); checks the
    // header's magic, ring layout version and size against the file, and that
    // `notifyFd` is the read end of a pipe (made non-blocking). Takes
    // ownership of both fds.
    static CompletionRing attach(Fd memfd, Fd notifyFd, const std::string& name);

    CompletionRing(CompletionRing&&) noexcept = default;
    CompletionRing& operator=(CompletionRing&&) noexcept = default;
    CompletionRing(const CompletionRing&) = delete;
    CompletionRing& operator=(const CompletionRing&) = delete;

    int memfd() const noexcept { return memfd_.get(); }
    // The notifier's read end: readable when the producer signalled (what a
    // consumer polls, and what npfd hands its client).
    int notifyFd() const noexcept { return notifyRead_.get(); }
    uint32_t size() const noexcept { return size_; }
    // Bytes of the mapping for a ring of `entries`.
    static size_t mappingSize(uint32_t entries) noexcept;

private:
    friend class CompletionProducer;
    friend class CompletionConsumer;
    CompletionRing(Fd memfd, Fd notifyRead, Fd notifyWrite, MmapArea map, uint32_t size) noexcept;
    npf_completion_ring* hdr() const noexcept { return map_.as<npf_completion_ring>(); }
    npf_completion* entries() const noexcept
    {
        return reinterpret_cast<npf_completion*>(map_.as<char>() + sizeof(npf_completion_ring));
    }

    Fd memfd_;
    Fd notifyRead_;
    Fd notifyWrite_; // the creator's only (empty in an attached ring)
    MmapArea map_;
    uint32_t size_ = 0; // cached: the shared header is writable by the other side
};

struct CompletionProducerStats {
    uint64_t pushed = 0;  // entries made visible
    uint64_t full = 0;    // write() calls that found no room for everything
    uint64_t wakeups = 0; // signals sent (only when the consumer was waiting)
    uint64_t badCons = 0; // found the consumer's cursor out of range (wrote nothing)
};

// The producer side: one thread at a time (callers serialise).
class CompletionProducer {
public:
    explicit CompletionProducer(CompletionRing& ring) noexcept;
    CompletionProducer(const CompletionProducer&) = delete;
    CompletionProducer& operator=(const CompletionProducer&) = delete;

    // Free entries (0 when full or when the consumer's cursor is corrupt).
    size_t room() noexcept;
    // Appends the first min(batch.size(), room()) entries, publishes them with
    // one store and wakes a waiting consumer. Returns entries written; fewer
    // than batch.size() means back-pressure (counted `full`), nothing is
    // overwritten.
    size_t write(std::span<const npf_completion> batch) noexcept
    {
        const size_t n = append(batch);
        if (n)
            wakeIfWaiting();
        return n;
    }
    // write() in two steps, for a publisher that appends several batches in
    // a row: append() publishes without waking; wakeIfWaiting() after the
    // last of them signals a waiting consumer once, instead of once per
    // batch (a consumer on the producer's CPU would run, and sleep again,
    // between every two).
    size_t append(std::span<const npf_completion> batch) noexcept;
    void wakeIfWaiting() noexcept;
    bool push(const npf_completion& c) noexcept { return write({&c, 1}) == 1; }
    // True while the consumer is (about to be) asleep on the notifier.
    bool consumerWaiting() const noexcept;
    // Wakes the consumer whether or not an entry is ready (it then finds
    // none, and asks why: the service stopped).
    void wake() noexcept;
    // Any thread.
    CompletionProducerStats stats() const noexcept;

private:
    CompletionRing& ring_;
    uint64_t prod_; // our copy of hdr->prod
    std::atomic<uint64_t> pushed_{0}, full_{0}, wakeups_{0}, badCons_{0};
};

// The consumer side: one thread.
class CompletionConsumer {
public:
    explicit CompletionConsumer(CompletionRing& ring) noexcept;
    CompletionConsumer(const CompletionConsumer&) = delete;
    CompletionConsumer& operator=(const CompletionConsumer&) = delete;

    // Copies up to max ready entries to out, frees them; never blocks.
    size_t poll(size_t max, npf_completion* out) noexcept;
    // Entries ready now, without consuming.
    size_t ready() noexcept { return ready(std::memory_order_acquire); }
    // Blocks until an entry is ready or timeout passes (negative = forever).
    // Returns entries ready (> 0), 0 on timeout (or a bare wake()), -EPROTO on
    // a corrupt producer cursor, or another -errno from poll(2). With a
    // hangupFd (an npfd client's connection), -EPIPE once it hangs up (the
    // producer is gone) and nothing is ready.
    int wait(std::chrono::milliseconds timeout, int hangupFd = -1) noexcept;
    // For a consumer that sleeps on notifyFd() itself (epoll): clears the
    // signals notifyFd() holds and asks the producer for one more when it
    // next publishes (the same wait word and Dekker pairing as wait()).
    // Returns entries ready (> 0: not armed, poll them), 0 when armed,
    // -EPROTO on a corrupt producer cursor, -EPIPE when the producer's end
    // of the notifier is closed (it is gone) and nothing is ready.
    int arm() noexcept;
    int notifyFd() const noexcept { return ring_.notifyFd(); }
    // Times the producer's cursor was out of range (read nothing). Any thread.
    uint64_t badProd() const noexcept { return badProd_.load(std::memory_order_relaxed); }

private:
    size_t ready(std::memory_order order) noexcept;

    CompletionRing& ring_;
    uint64_t cons_; // our copy of hdr->cons
    std::atomic<uint64_t> badProd_{0};
};

} // namespace npf
