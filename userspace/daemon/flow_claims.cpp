#include "daemon/flow_claims.h"

#include <algorithm>

namespace npf::daemon {

bool overlap(const dataplane::FlowSpec& a, const dataplane::FlowSpec& b) noexcept
{
    return a.port == b.port && (a == b || a.family == NPF_FAMILY_ANY || b.family == NPF_FAMILY_ANY);
}

const Session* FlowClaims::claim(const Iface& iface, const dataplane::FlowSpec& spec, const Session* s)
{
    std::vector<Claim>& claims = ports_[Port{&iface, spec.port}];
    for (const Claim& c : claims)
        if (overlap(c.spec, spec) && (c.session != s || c.spec == spec))
            return c.session;
    try {
        claims.push_back({s, spec});
    } catch (...) {
        if (claims.empty())
            ports_.erase(Port{&iface, spec.port});
        throw;
    }
    return nullptr;
}

void FlowClaims::release(const Iface& iface, const dataplane::FlowSpec& spec) noexcept
{
    auto it = ports_.find(Port{&iface, spec.port});
    if (it == ports_.end())
        return;
    std::erase_if(it->second, [&](const Claim& c) { return c.spec == spec; });
    if (it->second.empty())
        ports_.erase(it);
}

} // namespace npf::daemon
