// The queues a Service will serve on an interface and the memory each will
// hold, known before it pins any: npfd adds them up over its interfaces and
// checks the sum against its cgroup's memory limit (daemon/memory_limit.h).
#pragma once

#include <cstdint>

#include "npf/engine.h"
#include "xsk/config.h"
#include "xsk/sizing.h"

namespace npf {

struct QueuePlan {
    uint32_t queues = 0;    // what the service serves: cfg.queues, else `available`
    uint32_t available = 0; // what npf_xdp serves on it: the attached program's, else the NIC's RX queues
    uint32_t mtu = 0;
    xsk::QueueSizes sizes;
    uint64_t perQueue = 0; // bytes: xsk::queueMemory(sizes)
};

// For a Service of `cfg` on cfg.ifname in the calling thread's network
// namespace. Throws what the Service would for an interface that does not
// exist or a program it cannot open; a cfg.queues above `available` plans
// `available` (npfd, for which --queues is a bound, then serves that many; a
// Service given more refuses, saying so).
QueuePlan planQueues(const EngineConfig& cfg);

// The sizes a Service gives each queue of an interface with this MTU.
xsk::QueueSizes serviceQueueSizes(const EngineConfig& cfg, uint32_t mtu) noexcept;

// Queue q of interface `ifindex` bound with those sizes (npf's own sockets,
// or the ones npfd makes for a delegated client). Each flow bounds its
// datagrams by its own region (ServedFlow::claim): the sockets by the largest.
xsk::QueueConfig serviceQueueConfig(uint32_t ifindex, uint32_t q, const xsk::QueueSizes& sizes) noexcept;

} // namespace npf
