// An interface whose data path npfd hands to its one client (delegated
// mode, docs/architecture.md): npfd attaches npf_xdp and, for each client
// that takes the interface, makes every queue's sockets over a new UMEM
// (xsk::DelegatedQueue) and the flows' entries; the client's libnpf runs
// the engine. One client at a time: the next one gets new sockets and a new
// UMEM once the last one's are gone from the queues.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/dataplane.h"
#include "npf/engine.h"
#include "xsk/handover.h"
#include "xsk/sizing.h"

namespace npf::daemon {

class Delegation {
public:
    // In the interface's network namespace: attaches npf_xdp (or opens it)
    // and sizes the queues; no socket yet. cfg.queues: the queues to serve.
    explicit Delegation(const EngineConfig& cfg);
    ~Delegation(); // the holder's sockets leave the XSKMAP; detaches what it attached
    Delegation(const Delegation&) = delete;
    Delegation& operator=(const Delegation&) = delete;

    // The client that holds the interface (a Session), nullptr if none.
    const void* holder() const noexcept { return holder_; }
    // `who` takes the interface (hello): nobody else may until it lets go.
    bool reserve(const void* who) noexcept;
    // The holder's sockets, new, for every queue. In the interface's
    // namespace. Throws std::system_error: EBUSY while the last holder's
    // sockets are still bound (a process that kept them), naming it.
    void bind();
    // The holder went: its sockets leave the XSKMAP; npfd's copies close.
    void release(const void* who) noexcept;

    const dataplane::Dataplane& dp() const noexcept { return *dp_; }
    uint32_t queues() const noexcept { return queues_; }
    const xsk::QueueSizes& sizes() const noexcept { return sizes_; }
    // Queue q's sockets (after bind()).
    const xsk::DelegatedQueue& queue(uint32_t q) const { return *bound_.at(q); }
    bool bound() const noexcept { return !bound_.empty(); }

private:
    EngineConfig cfg_;
    bool attachedByUs_ = false;
    std::optional<dataplane::Dataplane> dp_;
    uint32_t queues_ = 0;
    xsk::QueueSizes sizes_;
    const void* holder_ = nullptr;
    std::vector<std::unique_ptr<xsk::DelegatedQueue>> bound_;
};

} // namespace npf::daemon
