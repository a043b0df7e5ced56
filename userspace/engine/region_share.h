// A pager's view of the service's regions: a snapshot of the RegionSet,
// taken again when it changes, and the regions of it the pager owns (their
// CPU faults, their clients' protection and prefetch are its job alone;
// PagerShard says which).
#pragma once

#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/pager_context.h"
#include "region/region.h"

namespace npf {

class RegionShare {
public:
    RegionShare(const PagerContext& ctx, PagerShard shard) : ctx_(ctx), shard_(shard) {}

    // Takes a new snapshot if the set changed; true if it did (the poll set
    // must be built again).
    bool refresh();
    // The userfaultfds of the owned regions (and of their npfd clients).
    void addPollFds(std::vector<pollfd>& fds) const;
    bool owns(const Region* r) const noexcept { return std::find(owned_.begin(), owned_.end(), r) != owned_.end(); }
    // Another pager owns `r`: wake it (to prefetch ahead of a flow that faulted).
    void wakeOwner(const Region* r) const noexcept;
    // CPU faults of the owned regions, their clients' too: a thread is
    // blocked on each of them.
    void serveFaults() noexcept;
    // npfd clients' posted buffers, protected from eviction before anything
    // this round installs (and evicts to the budget). By the region's owner:
    // a pager that drains a backup ring into another's region relies on it
    // (installs into a region take its lock).
    void protectClients() noexcept;

private:
    const PagerContext& ctx_;
    const PagerShard shard_;
    std::vector<RegionSet::Entry> all_; // the snapshot
    std::vector<Region*> owned_;
    uint64_t gen_ = ~0ull;
};

} // namespace npf
