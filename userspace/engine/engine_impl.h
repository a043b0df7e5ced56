// Internals of npf::Engine: a Service (the interface's dataplane) serving
// one region of the engine's own, and the application side of its flows.
// Service (service.h) says which thread runs what.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "dataplane/flow_ring.h"
#include "engine/service.h"
#include "engine/xdp_link.h"
#include "npf/engine.h"
#include "region/region.h"

namespace npf {

struct Engine::Impl {
    explicit Impl(const EngineConfig& cfg);
    // npf::Client in delegated mode: the service runs on what npfd handed
    // over (`link`), the region's resident bitmap is npfd's map (`bitmap`),
    // and the region's userfaultfd is user-mode only (no privilege).
    Impl(const EngineConfig& cfg, std::unique_ptr<XdpLink> link, dataplane::ResidentMap bitmap);
    ~Impl();
    void makeRegion(bool userModeOnly); // the region, of cfg, over `bitmap`, served by `service`

    EngineConfig cfg;
    // Destroyed in reverse: the flows' application side, then the service
    // (threads stopped, flows withdrawn and removed), then the region, whose
    // bitmap XDP may read until the flows are gone.
    std::optional<dataplane::ResidentMap> bitmap; // the region's, shared with XDP
    std::unique_ptr<Region> region;
    std::unique_ptr<Service> service;
    // The application's side of each open flow and the service's.
    struct OpenFlow {
        std::unique_ptr<Flow> app;
        ServedFlow* served;
    };
    std::mutex flowsMu; // openFlow and closeFlow may run on any thread
    std::vector<OpenFlow> flows;
};

} // namespace npf
