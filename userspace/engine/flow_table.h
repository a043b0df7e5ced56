// Flow id -> served flow. open() and close() run on control threads
// (serialised by mu_); get(), claim() and forEach() on any engine thread,
// lock-free. A flow closed while the engine runs is unpublished first (XDP
// stops claiming for it, then the engine's threads stop finding it), and
// freed only after the owner's barrier: every worker batch and pager round
// that could still hold it has ended (Service::closeFlow).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "dataplane/flow_ring.h"
#include "engine/served_flow.h"
#include "engine/xdp_link.h"
#include "npf/engine.h"
#include "xsk/meta.h"

namespace npf {

class Region;

class FlowTable {
public:
    FlowTable(XdpLink& link, const EngineConfig& cfg);
    FlowTable(const FlowTable&) = delete;
    FlowTable& operator=(const FlowTable&) = delete;

    // Posts a previous engine left point into a region that is gone: discard
    // them and mark every flow unserved until this engine posts. Before any
    // socket is bound (XDP claims nothing until then).
    void withdrawStale();
    // Opens (or takes over, after a restart) the flow of `spec`, receiving
    // into `region`, whose bitmap and size XDP gets from `binding`. fresh: a
    // new entry and ring map even if one exists (npfd: a ring no other process
    // has mapped). Its posts are withdrawn: the sequencer and the
    // application's producer both start at the ring's cons. Throws
    // StateError(EEXIST) if this table has it open.
    ServedFlow& open(const dataplane::FlowSpec& spec, Region& region, const dataplane::RegionBinding& binding,
                     bool fresh, const CreditSetup& credits);
    // Closes one flow while the engine runs: withdraws its posts, removes (or
    // unbinds) its entry, unpublishes it, runs `barrier` (after which no
    // engine thread holds it), frees it.
    void close(ServedFlow& flow, const std::function<void()>& barrier) noexcept;
    // Withdraws every flow's posts and removes the flow entries this engine
    // added. Engine threads must have stopped.
    void closeAll() noexcept;

    ServedFlow* get(uint32_t id) const noexcept
    {
        return id < NPF_MAX_FLOWS ? byId_[id].load(std::memory_order_acquire) : nullptr;
    }
    // The flow of a frame and its claimed seq, or nullptr (counted in c).
    // A credit flow notes who sent it.
    ServedFlow* claim(const xsk::RxPacket& p, uint64_t* seq, EngineTally& c) const noexcept
    {
        ServedFlow* f = get(p.meta.flow);
        if (!f) {
            c.add<&EngineStats::rejected>();
            return nullptr;
        }
        if (!f->claim(p.meta, seq, c))
            return nullptr;
        if (f->credits)
            f->credits->see(p, *seq);
        return f;
    }
    // Ids are handed out lowest first: the pager's several passes per round
    // look at ids up to the highest one opened, not at all NPF_MAX_FLOWS.
    template <typename F>
    void forEach(F&& fn) const noexcept
    {
        const uint32_t end = idEnd_.load(std::memory_order_acquire);
        for (uint32_t id = 0; id < end; id++)
            if (ServedFlow* f = get(id))
                fn(*f);
    }
    // The flow ids the sockets accept frames for.
    const xsk::FlowSet& set() const noexcept { return set_; }

private:
    void removeEntry(const ServedFlow& f) noexcept;

    XdpLink& link_;
    const EngineConfig& cfg_;
    xsk::FlowSet set_;
    std::array<std::atomic<ServedFlow*>, NPF_MAX_FLOWS> byId_{};
    std::atomic<uint32_t> idEnd_{0}; // above every id ever opened (only grows)
    std::mutex mu_;
    std::vector<std::unique_ptr<ServedFlow>> open_; // under mu_
};

} // namespace npf
