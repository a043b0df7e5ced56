// What the pagers of a service share, built by the Service before them: the
// configuration, the flows, the regions and queues they serve, a way to wake
// each pager, and (for the lead) the service's hooks. Each pager's share of
// the work is its PagerShard.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/flow_table.h"
#include "engine/region_set.h"
#include "npf/engine.h"
#include "sys/fd.h"
#include "xsk/queue.h"

namespace npf {

// Which share of a service's work a pager has. Queues go round robin (pager
// q % count serves queue q's backup ring and its worker's deferred
// datagrams); regions continue the round robin after the queues, so that
// with one queue and one region, two pagers split the backup ring from the
// region's faults and prefetch. Whoever drains a backup ring places its
// payloads into any region (Region is thread-safe); a region's CPU faults,
// prefetch and its clients' protection are its owner's alone.
struct PagerShard {
    uint32_t index = 0, count = 1;
    uint32_t queues = 1; // the service's
    bool lead() const noexcept { return index == 0; }
    bool ownsQueue(uint32_t q) const noexcept { return q % count == index; }
    uint32_t regionOwner(uint64_t serial) const noexcept { return static_cast<uint32_t>((queues + serial) % count); }
};

// One eventfd per pager: any thread wakes pager k by writing wake(k).
class PagerWakers {
public:
    explicit PagerWakers(uint32_t pagers); // throws std::system_error
    void wake(uint32_t pager) const noexcept;
    int fd(uint32_t pager) const noexcept { return fds_[pager].get(); }
    void drain(uint32_t pager) const noexcept; // pager k, on waking

private:
    std::vector<Fd> fds_;
};

struct PagerHooks {
    std::function<void()> tick; // every 500 ms on the lead pager (the stats snapshot)
    std::function<void()> gone; // the interface vanished: the engine stops serving
};

struct PagerContext {
    const EngineConfig& cfg;
    const RegionSet& regions;
    FlowTable& flows;
    const std::vector<std::unique_ptr<xsk::QueueSockets>>& queues;
    const PagerWakers& wakers;
    uint32_t maxDatagram; // bytes of the largest packet's frames
    PagerHooks hooks;     // run by the lead
};

} // namespace npf
