// The dataplane of one interface, serving flows of any number of regions:
// the XDP program (attached, or opened if `npfctl attach` put it there), a
// primary and a backup AF_XDP socket per RX queue, one worker per queue, the
// pagers. npf::Engine is a Service with one region of its own; npfd runs a
// Service per interface for the regions of all its clients.
//
//   thread        type         runs                                  owns
//   control       Service      open/close flows, add/remove regions  the parts below
//   worker[q]     Worker       primary ring of queue q (fast path)   its batch, counters, histogram
//   pager[k]      Pager        its share of the backup rings and     scratch, histograms, (lead:)
//                              regions (PagerShard); lead: LOST      settle state
//   npf-barrier   GracePeriods RCU grace periods for the lead pager  -
//
// Shared by all of them: FlowTable (id -> ServedFlow: sequencer, completion
// producer, settle marks, the flow's Region), the RegionSet, the
// QueueSockets. Shared with XDP: each flow's post ring map, each region's
// resident bitmap map, the AF_XDP rings. Shared with the application (its
// process or another): the completion rings, the post rings.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/flow_ring.h"
#include "engine/credits.h"
#include "engine/flow_table.h"
#include "engine/pager.h"
#include "engine/region_set.h"
#include "engine/worker.h"
#include "engine/xdp_link.h"
#include "npf/engine.h"
#include "region/epoch.h"
#include "sys/fd.h"
#include "sys/round_counter.h"
#include "xsk/queue.h"

namespace npf {

class Service {
public:
    // cfg's region fields are not used (regions come with addRegion). Throws
    // std::system_error naming what failed (interface, attach, sockets).
    // `epochs`: a domain shared with other services (npfd: a client's region
    // may receive on several interfaces); nullptr = one of its own. The
    // first works npf_xdp itself (LocalXdp); the second runs on `link`
    // (npf::Client in delegated mode: what npfd handed over).
    explicit Service(const EngineConfig& cfg, EpochDomain* epochs = nullptr);
    Service(const EngineConfig& cfg, std::unique_ptr<XdpLink> link, EpochDomain* epochs = nullptr);
    ~Service(); // stops the threads, withdraws and removes the flows, detaches what it attached
    Service(const Service&) = delete;
    Service& operator=(const Service&) = delete;

    void start();
    // EngineConfig::runToCompletion: one batch of each queue's primary ring
    // on the calling thread; the datagrams taken.
    uint32_t runFastPath() noexcept;
    // The primary rings' sockets (readable when datagrams wait).
    std::vector<int> fastPathFds() const;

    // Regions: the pagers serve their faults. A region is removed only
    // after its flows are closed; remove returns once the pagers let go of it.
    void addRegion(Region& r);
    void removeRegion(Region& r) noexcept;
    // Fast-path writers of every region are readers of this domain.
    EpochDomain& epochs() noexcept { return epochs_; }

    // credits: the flow's (CreditConfig); the first credit flow starts the
    // credit thread (its socket in the service's network namespace).
    ServedFlow& openFlow(const dataplane::FlowSpec& spec, Region& region, const dataplane::RegionBinding& binding,
                         bool fresh = false, const CreditConfig& credits = {});
    // While the engine runs: the flow's datagrams pass to the kernel from
    // now on, and no engine thread holds it when this returns.
    void closeFlow(ServedFlow& f) noexcept;

    // Why the service no longer serves ("" while it does): the interface is
    // gone, or the link is lost (delegated: npfd hung up; asks the kernel).
    std::string failure() const;
    // The interface is gone. Any thread, no system call.
    bool ifaceGone() const noexcept { return ifaceGone_.load(std::memory_order_acquire); }
    EngineStats stats() const;
    // The counters of its regions, added up (npfd: its clients' regions).
    RegionStats regionStats() const;
    std::string statsJson() const;
    std::array<uint64_t, NPF_STAT_MAX> xdpCounters() const;
    // One open flow's accounting since it was opened (npf::Flow::stats). Any
    // thread; throws std::system_error if its XDP counters cannot be read.
    FlowStats flowStats(const ServedFlow& f) const;
    uint32_t queues() const noexcept { return static_cast<uint32_t>(queues_.size()); }
    // The interface (in the service's network namespace) and the id of the
    // npf_xdp program whose maps it uses.
    int ifindex() const noexcept { return link_->ifindex(); }
    uint32_t progId() const noexcept { return link_->progId(); }
    // The link is lost (delegated: npfd hung up); probe: may ask the kernel.
    bool linkLost(bool probe) const { return !link_->lost(probe).empty(); }
    int hangupFd() const noexcept { return link_->hangupFd(); }
    // Its workers' and pagers' loops ("npf-worker-0", "npf-pager"), each
    // named `prefix` + its thread's name, while they run: none before
    // start() nor once the interface is gone. Any thread.
    void loops(const std::string& prefix, std::vector<LoopProgress>& out) const;
    bool attachedByUs() const noexcept { return link_->attachedByUs(); }
    // Returns after a whole round of every pager that began after the call
    // (npfd: the posts of its clients are protected from eviction by then).
    void syncPagers() noexcept;
    // The same without waiting (the control thread never waits on the data
    // path without end): askPagers() asks for those rounds, pagersSynced()
    // says whether they have ended.
    using PagerTickets = std::vector<uint64_t>;
    PagerTickets askPagers();
    bool pagersSynced(const PagerTickets& t) noexcept;

private:
    void setUp();
    void stopThreads() noexcept;
    void writeStatsFile() noexcept;
    void barrier() noexcept; // no worker batch or pager round that began before is still running

    EngineConfig cfg_;
    Fd netns_; // the network namespace the service was created in (teardown runs there)
    bool started_ = false;
    std::unique_ptr<XdpLink> link_;
    std::unique_ptr<EpochDomain> ownEpochs_;
    EpochDomain& epochs_;
    RegionSet regions_;
    std::unique_ptr<FlowTable> flows_;
    std::vector<std::unique_ptr<xsk::QueueSockets>> queues_;
    std::unique_ptr<PagerWakers> wakers_;
    std::unique_ptr<PagerContext> pagerCtx_;
    std::vector<std::unique_ptr<Pager>> pagers_;   // [0] is the lead
    std::vector<std::unique_ptr<Worker>> workers_; // index = queue
    std::mutex creditMu_;                           // makes credits_ once
    std::unique_ptr<CreditSender> credits_;         // once a flow asks for credits
    std::atomic<bool> ifaceGone_{false};           // set once, by the lead pager
    std::string statsPath_;
    // Completions of flows closed and counters of regions removed while the
    // service ran: the totals stay monotonic when npfd's clients come and go.
    mutable std::mutex retiredMu_;
    SequencerStats retired_;
    RegionStats retiredRegions_;
};

} // namespace npf
