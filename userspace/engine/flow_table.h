// Flow id -> open flow. open() and close() run on application threads
// (serialised by mu_); get(), claim() and forEach() on any engine thread,
// lock-free: an entry, once published, lives until close(), which runs only
// after every engine thread has stopped.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "ctl/dataplane.h"
#include "ctl/flow_ring.h"
#include "engine/served_flow.h"
#include "npf/engine.h"
#include "xsk/meta.h"

namespace npf {

class Region;

class FlowTable {
public:
    FlowTable(ctl::Dataplane& dp, const EngineConfig& cfg);
    FlowTable(const FlowTable&) = delete;
    FlowTable& operator=(const FlowTable&) = delete;

    // Posts a previous engine left point into a region that is gone: discard
    // them and mark every flow unserved until this engine posts. Before any
    // socket is bound (XDP claims nothing until then).
    void withdrawStale();
    // Opens (or takes over, after a restart) the flow of `spec`; the
    // application posts into `region`, whose bitmap and size XDP gets from
    // `binding`. Throws ctl::StateError if it is open.
    Flow& open(const ctl::FlowSpec& spec, Region& region, const ctl::RegionBinding& binding);
    // Withdraws every flow's posts and removes the flow entries this engine
    // added. Engine threads must have stopped.
    void close() noexcept;

    ServedFlow* get(uint32_t id) const noexcept
    {
        return id < NPF_MAX_FLOWS ? byId_[id].load(std::memory_order_acquire) : nullptr;
    }
    // The flow of a frame and its claimed seq, or nullptr (counted in c).
    ServedFlow* claim(const npf_meta& m, uint64_t* seq, ClaimCounters& c) const noexcept
    {
        ServedFlow* f = get(m.flow);
        if (!f) {
            c.rejected.fetch_add(1, std::memory_order_relaxed);
            return nullptr;
        }
        return f->claim(m, seq, c) ? f : nullptr;
    }
    template <typename F>
    void forEach(F&& fn) const noexcept
    {
        for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++)
            if (ServedFlow* f = get(id))
                fn(*f);
    }
    // The flow ids the sockets accept frames for.
    const xsk::FlowSet& set() const noexcept { return set_; }

private:
    ctl::Dataplane& dp_;
    const EngineConfig& cfg_;
    xsk::FlowSet set_;
    std::array<std::atomic<ServedFlow*>, NPF_MAX_FLOWS> byId_{};
    std::mutex mu_;
    struct Open {
        std::unique_ptr<ServedFlow> served;
        std::unique_ptr<Flow> flow;
    };
    std::vector<Open> open_; // under mu_
};

} // namespace npf
