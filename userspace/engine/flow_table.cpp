#include "engine/flow_table.h"

#include "ctl/errors.h"
#include "engine/flow_impl.h"
#include "sys/log.h"

namespace npf {

FlowTable::FlowTable(ctl::Dataplane& dp, const EngineConfig& cfg) : dp_(dp), cfg_(cfg) {}

void FlowTable::withdrawStale()
{
    for (const ctl::FlowInfo& f : ctl::listFlows(dp_))
        if (std::optional<ctl::FlowRing> ring = ctl::FlowRing::open(dp_, f.id))
            PostProducer::withdraw(ring->cursor());
}

Flow& FlowTable::open(const ctl::FlowSpec& spec, Region& region, const ctl::RegionBinding& binding)
{
    std::lock_guard<std::mutex> lock(mu_);
    for (const Open& o : open_)
        if (o.served->spec == spec)
            throw ctl::StateError(EEXIST, "flow " + ctl::toString(spec) + " is already open on " + cfg_.ifname);
    ctl::EngineFlow opened = ctl::openEngineFlow(dp_, spec, binding);
    const ctl::FlowEntry entry = opened.entry;
    const ctl::FlowOrigin origin = opened.origin;
    // The application's producer starts at cons (and pulls prod back to it):
    // the engine's sequencer starts there too.
    auto app = std::make_unique<PostProducer>(opened.ring.posts(), opened.ring.cursor());
    auto served = std::make_unique<ServedFlow>(std::move(opened), spec, app->start(), cfg_.reorderTimeout,
                                               cfg_.completionRingSize);
    auto flow = std::make_unique<Flow>(std::make_unique<Flow::Impl>(*served, region, std::move(app)));
    Flow& ref = *flow;
    byId_[entry.id].store(served.get(), std::memory_order_release);
    set_.open(entry.id);
    open_.push_back({std::move(served), std::move(flow)});
    static constexpr const char* kOrigin[] = {
        "", " (taken over from an engine that exited: removed when this one exits)",
        " (added by npfctl: left in place when this engine exits)"};
    NPF_INFO("flow %u: %s on %s%s", entry.id, ctl::toString(spec).c_str(), cfg_.ifname.c_str(),
             kOrigin[static_cast<int>(origin)]);
    return ref;
}

void FlowTable::close() noexcept
{
    std::lock_guard<std::mutex> lock(mu_);
    for (const Open& o : open_) {
        // Withdraw the posts: they point into a region that is about to go.
        PostProducer::withdraw(o.served->cursor);
        try {
            const ctl::FlowEntry entry{o.served->id, o.served->gen};
            if (o.served->ownsEntry)
                ctl::delFlow(dp_, o.served->spec, entry);
            else
                ctl::unbindRegion(dp_, o.served->spec, entry);
        } catch (const std::exception& e) {
            NPF_WARN("removing flow %u: %s", o.served->id, e.what());
        }
    }
}

} // namespace npf
