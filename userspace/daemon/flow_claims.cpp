#include "daemon/flow_claims.h"

#include <algorithm>

namespace npf::daemon {

const Session* FlowClaims::claim(const Iface& iface, const dataplane::FlowSpec& spec, const Session* s)
{
    auto [it, fresh] = ports_.try_emplace(Port{&iface, spec.port}, Holder{s, {}});
    Holder& h = it->second;
    if (!fresh && (h.session != s || std::find(h.flows.begin(), h.flows.end(), spec) != h.flows.end()))
        return h.session;
    try {
        h.flows.push_back(spec);
    } catch (...) {
        if (fresh)
            ports_.erase(it);
        throw;
    }
    return nullptr;
}

void FlowClaims::release(const Iface& iface, const dataplane::FlowSpec& spec) noexcept
{
    auto it = ports_.find(Port{&iface, spec.port});
    if (it == ports_.end())
        return;
    std::erase(it->second.flows, spec);
    if (it->second.flows.empty())
        ports_.erase(it);
}

} // namespace npf::daemon
