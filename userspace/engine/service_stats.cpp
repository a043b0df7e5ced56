// A Service's counters: the snapshot (EngineStats) summed from every thread's tally,
// the regions and the completions; its JSON form; and the JSON file that
// `npfctl stats` reads (written by the lead pager every 500 ms, atomically).
#include <unistd.h>

#include <filesystem>

#include "counters/engine_stats.h"
#include "dataplane/stats.h"
#include "engine/service.h"
#include "engine/service_stats.h"
#include "region/region.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/replace_file.h"

namespace npf {
namespace {

EngineStats::Latency latency(const LatencyHistogram& h)
{
    return {h.count(), h.p50(), h.p99(), h.p999(), h.max()};
}

} // namespace

void addRegionCounters(EngineStats& s, const RegionStats& r, uint64_t pageSize) noexcept
{
    s.cpuFaults += r.cpuFaults + r.clientFaults; // its own mapping's and its client's
    s.packetFaults += r.packetFaults;
    s.prefetched += r.prefetched;
    s.evicted += r.evicted;
    s.restored += r.restored;
    s.residentPages += r.residentPages * (pageSize / NPF_PAGE_SIZE);
}

EngineStats Service::stats() const
{
    EngineStats s;
    FaultPath::Latencies fault;
    LatencyHistogram fast;
    for (const auto& p : pagers_) {
        p->counters().addTo(s);
        const FaultPath::Latencies& l = p->latencies();
        for (size_t i = 0; i < fault.size(); i++)
            fault[i].merge(l[i]);
    }
    for (const auto& w : workers_) {
        w->counters().addTo(s);
        fast.merge(w->latency());
    }
    SequencerStats completions;
    {
        std::lock_guard<std::mutex> lock(retiredMu_);
        completions = retired_;
        addRegionCounters(s, retiredRegions_, NPF_PAGE_SIZE); // resident: none
    }
    flows_->forEach([&](const ServedFlow& f) { completions += f.seq.stats(); });
    addCompletions(s, completions);
    for (const auto& q : queues_) {
        xsk::QueueStats qs = q->stats();
        s.badMeta += qs.badMeta();
        s.pinnedBytes += qs.umemBytes;
        s.kernelRxDropped += qs.kernelPrimary.rx_dropped + qs.kernelPrimary.rx_ring_full +
                             qs.kernelBackup.rx_dropped + qs.kernelBackup.rx_ring_full;
    }
    regions_.forEach([&](const Region& region) { addRegionCounters(s, region.stats(), region.pageSize()); });
    for (size_t i = 0; i < fault.size(); i++)
        s.*kFaultStages[i] = latency(fault[i]);
    s.completeToPublish = latency(completions.latency);
    s.fastTotal = latency(fast);
    return s;
}

RegionStats Service::regionStats() const
{
    RegionStats s;
    {
        std::lock_guard<std::mutex> lock(retiredMu_);
        s = retiredRegions_;
    }
    regions_.forEach([&](const Region& region) { addCounters(kRegionCounters, s, region.stats()); });
    return s;
}

FlowStats Service::flowStats(const ServedFlow& f) const
{
    // Completions first: every completed seq was claimed (and counted) by XDP
    // before, so a later read of XDP's counters covers them all and
    // claimed() >= completed() holds in every snapshot.
    const SequencerStats q = f.seq.stats();
    const dataplane::FlowXdpStats now = link_->flowXdpStats(f.spec, {f.id, f.gen});
    FlowStats s;
    for (size_t i = 0; i < s.xdp.size(); i++)
        s.xdp[i] = now[i] - f.xdpAtOpen[i];
    addCompletions(s, q);
    s.lostUnarrived = q.lostTimeout;
    s.rejected = q.duplicates + q.outOfWindow;
    const uint64_t claimed = s.claimed(), completed = s.completed();
    s.inFlight = claimed > completed ? claimed - completed : 0;
    if (const FlowCredits* c = f.credits.get()) {
        s.creditsSent = c->sent.load(std::memory_order_relaxed);
        s.creditsWithheld = c->withheld.load(std::memory_order_relaxed);
        s.creditWaits = c->waits.load(std::memory_order_relaxed);
        s.creditLimit = c->limit.load(std::memory_order_relaxed);
    }
    return s;
}

std::string Service::statsJson() const
{
    counters::Json j = counters::engineStatsJson(stats(), cfg_.ifname, ::getpid(), monotonicNs());
    counters::addRegionStats(j, regionStats());
    // Each region's route (Region::route), "a,b" when they differ.
    std::string routes;
    regions_.forEach([&](const Region& region) {
        const std::string r = region.route();
        if (("," + routes + ",").find("," + r + ",") == std::string::npos)
            routes += (routes.empty() ? "" : ",") + r;
    });
    j["route"] = routes;
    // Each flow's accounting, for `npfctl flow list`. An epoch section: a
    // flow closed meanwhile is freed only after it (Service::closeFlow).
    counters::Json& flows = j["flows"] = counters::Json::array();
    if (flows_) {
        EpochDomain::Reader reader(epochs_);
        reader.enter();
        flows_->forEach([&](const ServedFlow& f) {
            try {
                flows.push_back(counters::engineFlowJson({f.id, f.gen, f.credits != nullptr, flowStats(f)}));
            } catch (const std::exception& e) { // forEach is noexcept: the flow is left out
                NPF_WARN_RL("stats of flow %u: %s", f.id, e.what());
            }
        });
        reader.exit();
    }
    return j.dump();
}

void Service::writeStatsFile() noexcept
{
    if (statsPath_ == "-")
        return;
    try {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(statsPath_).parent_path(), ec);
        if (ec) {
            NPF_WARN_RL("creating the directory of %s: %s", statsPath_.c_str(), ec.message().c_str());
            return;
        }
        // Mode 0600: it holds every flow's counters, whoever's (npfd's
        // tenants); npfctl reads it as root. Not synced: a snapshot on tmpfs,
        // rewritten every 500 ms by the lead pager.
        replaceWhole(statsPath_, statsPath_ + ".tmp", statsJson(), 0600, /*sync=*/false);
    } catch (const std::exception& e) {
        NPF_WARN_RL("stats snapshot: %s", e.what());
    }
}

} // namespace npf
