#include "engine/flow_table.h"

#include <algorithm>

#include "region/region.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf {

FlowTable::FlowTable(XdpLink& link, const EngineConfig& cfg) : link_(link), cfg_(cfg) {}

void FlowTable::withdrawStale() { link_.withdrawStale(); }

ServedFlow& FlowTable::open(const dataplane::FlowSpec& spec, Region& region, const dataplane::RegionBinding& binding,
                            bool fresh, const CreditSetup& credits)
{
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& o : open_)
        if (o->spec == spec)
            throw StateError(EEXIST, "flow " + dataplane::toString(spec) + " is already open on " + cfg_.ifname);
    dataplane::EngineFlow opened = link_.openFlow(spec, binding, fresh);
    const dataplane::FlowEntry entry = opened.entry;
    const dataplane::FlowOrigin origin = opened.origin;
    // Posts a previous producer left are discarded: both sides start at cons.
    dataplane::PostProducer::withdraw(opened.ring.cursor());
    auto served =
        std::make_unique<ServedFlow>(std::move(opened), spec, region, cfg_.reorderTimeout, cfg_.completionRingSize, credits);
    ServedFlow& ref = *served;
    open_.push_back(std::move(served));
    byId_[entry.id].store(&ref, std::memory_order_release);
    if (idEnd_.load(std::memory_order_relaxed) <= entry.id)
        idEnd_.store(entry.id + 1, std::memory_order_release);
    set_.open(entry.id);
    static constexpr const char* kOrigin[] = {
        "", " (taken over from an engine that exited: removed when this one exits)",
        " (added by npfctl: left in place when this engine exits)"};
    NPF_INFO("flow %u: %s on %s%s", entry.id, dataplane::toString(spec).c_str(), cfg_.ifname.c_str(),
             kOrigin[static_cast<int>(origin)]);
    return ref;
}

void FlowTable::removeEntry(const ServedFlow& f) noexcept
{
    // Withdraw the posts: they point into a region that may be about to go.
    dataplane::PostProducer::withdraw(f.cursor);
    try {
        link_.removeFlow(f.spec, {f.id, f.gen}, f.ownsEntry);
    } catch (const std::exception& e) {
        NPF_WARN("removing flow %u: %s", f.id, e.what());
    }
}

void FlowTable::close(ServedFlow& flow, const std::function<void()>& barrier) noexcept
{
    std::unique_ptr<ServedFlow> gone;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = std::find_if(open_.begin(), open_.end(), [&](const auto& o) { return o.get() == &flow; });
        if (it == open_.end())
            return;
        // XDP first (delFlow returns after an RCU grace period: no XDP run
        // claims for it any more), then the engine's threads.
        removeEntry(flow);
        set_.close(flow.id);
        byId_[flow.id].store(nullptr, std::memory_order_release);
        gone = std::move(*it);
        open_.erase(it);
    }
    flow.wakeApplication();
    barrier();
    gone->releaseProtection(); // no engine thread holds it now
    NPF_INFO("flow %u: %s on %s closed", gone->id, dataplane::toString(gone->spec).c_str(), cfg_.ifname.c_str());
}

void FlowTable::closeAll() noexcept
{
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& o : open_)
        removeEntry(*o);
}

} // namespace npf
