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
    void run(bool busy) noexcept;

private:
    void ahead(ServedFlow& f, bool busy) noexcept;

    const PagerContext& ctx_;
    const RegionShare& share_;
};

} // namespace npf
