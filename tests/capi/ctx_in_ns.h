// The C API's tests from C++: an engine context opened and closed in the rx
// namespace of an e2e Rig (as EngineInNs does for npf::Engine).
#pragma once

#include "engine_fixture.h"
#include "npf/npf.h"

namespace npf::e2e {

// Engine options with the given interface and a 4 MiB region.
inline npf_engine_opts engineOpts(const char* ifname)
{
    npf_engine_opts o{};
    o.sz = sizeof(o);
    o.ifname = ifname;
    o.region_size = 4ull << 20;
    return o;
}

class CtxInNs {
public:
    CtxInNs(Rig& rig, npf_engine_opts o) : rig_(rig)
    {
        test::NetnsGuard in(rig_.veth().rxNs());
        rc_ = npf_engine_open(&o, &ctx_);
    }
    ~CtxInNs() { close(); }
    CtxInNs(const CtxInNs&) = delete;
    CtxInNs& operator=(const CtxInNs&) = delete;
    // npf_engine_open's result; the context (NULL if it failed or was closed).
    int rc() const { return rc_; }
    npf_ctx* get() const { return ctx_; }
    void close()
    {
        test::NetnsGuard in(rig_.veth().rxNs());
        npf_ctx_close(ctx_);
        ctx_ = nullptr;
    }

private:
    Rig& rig_;
    npf_ctx* ctx_ = nullptr;
    int rc_ = 0;
};

} // namespace npf::e2e
