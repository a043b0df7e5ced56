// Which npfd client holds which flow of which interface. A port of an
// interface belongs to one client at most, whatever the addresses: a flow for
// one address and a wildcard flow overlap (XDP prefers the exact address), so
// two clients may not share a port at all; one client may hold the port for
// several addresses.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "dataplane/flows.h"

namespace npf::daemon {

struct Iface;
class Session;

class FlowClaims {
public:
    // Takes spec on `iface` for `s`; returns who holds it already (s itself,
    // for a flow it has) and takes nothing then.
    const Session* claim(const Iface& iface, const dataplane::FlowSpec& spec, const Session* s);
    void release(const Iface& iface, const dataplane::FlowSpec& spec) noexcept;

private:
    struct Port {
        const Iface* iface;
        uint16_t port;
        auto operator<=>(const Port&) const = default;
    };
    struct Holder {
        const Session* session;
        std::vector<dataplane::FlowSpec> flows; // its flows on the port (an address each, or any)
    };
    std::map<Port, Holder> ports_;
};

} // namespace npf::daemon
