#include "engine/prefetcher.h"

#include <algorithm>

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
    if (!f.faulted.exchange(false, std::memory_order_relaxed))
        return false;
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
    if (busy) {
        // Between two backup batches: one page a round, so the backup
        // ring keeps draining; the flow stays marked for the next round.
        for (uint64_t s = cons; s < end; s++) {
            const dataplane::Post p = f.posts.slot(s);
            if (f.region.isResident(p.offset, p.len))
                continue;
            (void)f.region.prefetch(p.offset & ~(page - 1), page);
            f.faulted.store(true, std::memory_order_relaxed);
            return false; // more next round, after the backup rings
        }
        return false;
    }
    // Buffers are usually posted back to back: install each contiguous
    // run with one call (one batch of UFFDIO_COPYs, one eviction pass), in
    // chunks of kChunkPages until the slice is over (at least one chunk:
    // prefetch always gets somewhere).
    const uint64_t chunk = kChunkPages * page;
    bool first = true;
    auto install = [&](uint64_t off, uint64_t len) {
        for (uint64_t done = 0; done < len; done += chunk) {
            if (!first && monotonicNs() >= deadline)
                return false;
            first = false;
            (void)f.region.prefetch(off + done, std::min(chunk, len - done));
        }
        return true;
    };
    uint64_t runOff = 0, runEnd = 0;
    for (uint64_t s = cons; s < end; s++) {
        const dataplane::Post p = f.posts.slot(s);
        if (f.region.isResident(p.offset, p.len))
            continue;
        if (runEnd > runOff && p.offset == runEnd) {
            runEnd += p.len;
            continue;
        }
        if (runEnd > runOff && !install(runOff, runEnd - runOff)) {
            f.faulted.store(true, std::memory_order_relaxed);
            return true;
        }
        runOff = p.offset;
        runEnd = p.offset + p.len;
    }
    if (runEnd > runOff && !install(runOff, runEnd - runOff)) {
        f.faulted.store(true, std::memory_order_relaxed);
        return true;
    }
    return false;
}

} // namespace npf
