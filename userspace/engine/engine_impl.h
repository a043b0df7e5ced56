// Internals of npf::Engine: it wires the parts and owns their lifecycle.
//
//   thread        type         runs                                  owns
//   application   Flow::Impl   post, poll, wait                      post producer, completion consumer
//   worker[q]     Worker       primary ring of queue q (fast path)   its batch, counters, histogram
//   pager         Pager        backup rings, uffd, deferred, LOST    scratch, histograms, settle state
//   npf-barrier   GracePeriods RCU grace periods for the pager       -
//
// Shared by all of them: FlowTable (id -> ServedFlow: sequencer, completion
// producer, settle marks), the Region, the QueueSockets. Shared with XDP:
// the post rings (each ServedFlow's ring map), the resident bitmap, the AF_XDP
// rings. Shared with the application process: the completion rings.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ctl/dataplane.h"
#include "ctl/flow_ring.h"
#include "engine/flow_table.h"
#include "engine/pager.h"
#include "engine/worker.h"
#include "npf/engine.h"
#include "region/epoch.h"
#include "region/region.h"
#include "sys/fd.h"
#include "xsk/queue.h"

namespace npf {

struct Engine::Impl {
    explicit Impl(const EngineConfig& cfg);
    ~Impl();

    void startThreads();
    void stopThreads() noexcept;
    void detachOnExit() noexcept; // what the engine attached (teardown, in its namespace)
    void writeStatsFile() noexcept;
    EngineStats snapshot() const;
    std::string json() const;

    EngineConfig cfg;
    Fd netns; // the network namespace the engine was created in (teardown runs there)
    bool attachedByUs = false;
    std::optional<ctl::Dataplane> dp;
    std::optional<ctl::ResidentMap> bitmap; // the region's, shared with XDP
    EpochDomain epochs;
    std::unique_ptr<Region> region;
    std::unique_ptr<FlowTable> flows;
    std::vector<std::unique_ptr<xsk::QueueSockets>> queues;
    std::unique_ptr<Pager> pager;
    std::vector<std::unique_ptr<Worker>> workers; // index = queue
    std::atomic<bool> ifaceGone{false}; // set once, by the pager
    std::string statsPath;

private:
    void setUp(); // everything after the program is attached or opened
};

} // namespace npf
