#include "engine/prefetcher.h"

#include <algorithm>
#include <new>

#include "sys/clock.h"

namespace npf {

bool Prefetcher::run(bool busy) noexcept
{
    if (ctx_.cfg.prefetchDepth == 0)
        return false;
    const uint64_t deadline = monotonicNs() + kSliceNs;
    bool more = false;
    ctx_.flows.forEach([&](ServedFlow& f) { more |= ahead(f, busy, deadline); });
    return more;
}

bool Prefetcher::ahead(ServedFlow& f, bool busy, uint64_t deadline) noexcept
{
    const uint64_t page = f.region.pageSize();
    if ((busy && page == NPF_PAGE_SIZE) || !share_.owns(&f.region))
        return false;
    if (f.faulted.exchange(false, std::memory_order_relaxed) && !window(f))
        return false;
    // Busy: one page a round, between two backup batches, so the backup
    // ring keeps draining. Else chunks of kChunkPages until the slice is over
    // (at least one chunk: prefetch always gets somewhere).
    const uint64_t chunk = busy ? page : kChunkPages * page;
    bool first = true;
    while (f.prefetchNext < f.prefetchRuns.size()) {
        if (!first && (busy || monotonicNs() >= deadline))
            return !busy; // more next round (busy: after the backup rings)
        first = false;
        auto& [off, len] = f.prefetchRuns[f.prefetchNext];
        const uint64_t n = std::min(chunk, len);
        (void)f.region.prefetch(off, n);
        off += n;
        len -= n;
        if (len == 0)
            f.prefetchNext++;
    }
    f.prefetchRuns.clear();
    f.prefetchNext = 0;
    return false;
}

bool Prefetcher::window(ServedFlow& f) noexcept
{
    const uint64_t page = f.region.pageSize();
    // The post ring says exactly where the next datagrams of this flow go:
    // prefetchDepth buffers, and with 2 MiB pages at least the buffers
    // of the next two pages.
    const uint64_t cons = f.posts.consumed(), published = f.posts.published();
    uint64_t end = std::min(published, cons + ctx_.cfg.prefetchDepth);
    if (page > NPF_PAGE_SIZE && end > cons) {
        const uint64_t first = f.posts.slot(cons).offset / page;
        while (end < published && end < cons + NPF_POST_RING_SIZE && f.posts.slot(end).offset / page < first + 2)
            end++;
    }
    // A new fault's window replaces what was left of the last one. Buffers
    // are usually posted back to back: each contiguous run of missing ones
    // is one range (one batch of UFFDIO_COPYs, one eviction pass a chunk).
    f.prefetchRuns.clear();
    f.prefetchNext = 0;
    try {
        uint64_t runOff = 0, runEnd = 0;
        for (uint64_t s = cons; s < end; s++) {
            const dataplane::Post p = f.posts.slot(s);
            if (f.region.isResident(p.offset, p.len))
                continue;
            if (runEnd > runOff && p.offset == runEnd) {
                runEnd += p.len;
                continue;
            }
            if (runEnd > runOff)
                f.prefetchRuns.emplace_back(runOff, runEnd - runOff);
            runOff = p.offset;
            runEnd = p.offset + p.len;
        }
        if (runEnd > runOff)
            f.prefetchRuns.emplace_back(runOff, runEnd - runOff);
    } catch (const std::bad_alloc&) { // no prefetch this time: the datagrams bring their pages in
        f.prefetchRuns.clear();
        return false;
    }
    return !f.prefetchRuns.empty();
}

} // namespace npf
