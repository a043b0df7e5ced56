// Prefetch: after a flow's datagram faulted, the pager that owns the flow's
// region installs the pages of the flow's next posted buffers (the post ring
// says exactly where its next datagrams go) before they arrive.
#pragma once

#include "engine/pager_context.h"
#include "engine/region_share.h"

namespace npf {

class Prefetcher {
public:
    Prefetcher(const PagerContext& ctx, const RegionShare& share) : ctx_(ctx), share_(share) {}

    // `busy`: the backup rings are full. Then 4 KiB pages are not prefetched
    // (the datagrams bring them in at the same cost per page) and 2 MiB ones
    // one a round, so the backup rings keep draining.
    // Otherwise a round prefetches for at most kSliceNs (a fresh 4 KiB page
    // can cost 10 us on a VM: 256 buffers ahead are milliseconds), so that a
    // datagram that faults meanwhile waits for a slice, not for the whole
    // prefetch. Returns true if a flow has more to prefetch: the pager comes
    // back at once.
    bool run(bool busy) noexcept;
    static constexpr uint64_t kSliceNs = 50'000;
    // Pages installed by one call between two looks at the clock.
    static constexpr uint64_t kChunkPages = 8;

private:
    // True if f has more to prefetch after this round.
    bool ahead(ServedFlow& f, bool busy, uint64_t deadline) noexcept;
    // f faulted: its window's missing ranges into f.prefetchRuns; false if none.
    bool window(ServedFlow& f) noexcept;

    const PagerContext& ctx_;
    const RegionShare& share_;
};

} // namespace npf
