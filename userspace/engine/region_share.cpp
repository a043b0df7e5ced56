#include "engine/region_share.h"

#include <cstring>

#include "sys/log.h"

namespace npf {

bool RegionShare::refresh()
{
    if (ctx_.regions.generation() == gen_)
        return false;
    gen_ = ctx_.regions.snapshot(all_);
    owned_.clear();
    for (const RegionSet::Entry& e : all_)
        if (shard_.regionOwner(e.serial) == shard_.index)
            owned_.push_back(e.region);
    return true;
}

void RegionShare::addPollFds(std::vector<pollfd>& fds) const
{
    for (Region* r : owned_) {
        fds.push_back({r->uffdFd(), POLLIN, 0});
        if (r->clientUffdFd() >= 0) // an npfd client's faults
            fds.push_back({r->clientUffdFd(), POLLIN, 0});
    }
}

void RegionShare::wakeOwner(const Region* r) const noexcept
{
    for (const RegionSet::Entry& e : all_)
        if (e.region == r) {
            if (const uint32_t k = shard_.regionOwner(e.serial); k != shard_.index)
                ctx_.wakers.wake(k);
            return;
        }
}

void RegionShare::serveFaults() noexcept
{
    for (Region* r : owned_) {
        if (int n = r->serviceFaults(); n < 0)
            NPF_WARN_RL("npf pager: serving CPU faults: %s", strerror(-n));
        if (r->clientUffdFd() >= 0 && !r->clientGone())
            (void)r->serviceClientFaults(); // a client gone is the owner's to clean up
    }
}

void RegionShare::protectClients() noexcept
{
    ctx_.flows.forEach([this](ServedFlow& f) {
        if (f.region.adopted() && owns(&f.region))
            f.syncProtection();
    });
}

} // namespace npf
