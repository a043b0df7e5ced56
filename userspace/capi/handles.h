// What the opaque handles of npf/npf.h are: a context owns its engine or
// client and the handles of its open flows; a flow handle names its Flow and
// the context that closes it.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "npf/client.h"
#include "npf/engine.h"
#include "npf/npf.h"

struct npf_flow_handle {
    npf_ctx* ctx = nullptr;
    npf::Flow* flow = nullptr;
    std::list<npf_flow_handle>::iterator self; // its place in ctx->flows
};

struct npf_ctx {
    // Exactly one of the two.
    std::unique_ptr<npf::Engine> engine;
    std::unique_ptr<npf::Client> client;
    std::string ifname; // the engine's interface

    // npf_flow_open and npf_flow_close may run on any thread.
    std::mutex flowsMu;
    std::list<npf_flow_handle> flows;

    npf::Flow& openFlow(uint16_t port, const npf::FlowOptions& opts, const std::string& iface);
    void closeFlow(npf::Flow& f);
};
