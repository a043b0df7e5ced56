// Which npfd client holds which flow of which interface. Two flows of one
// port overlap when they name the same address, or when one is a wildcard
// (XDP looks the exact address up first, so an address under another's
// wildcard would take that address's datagrams): overlapping flows belong to
// one client at most. Flows on different addresses of a port do not overlap:
// pods on their own addresses each have the whole port range.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "dataplane/flows.h"

namespace npf::daemon {

struct Iface;
class Session;

// True if a datagram could match both (same port; same address, or either any).
bool overlap(const dataplane::FlowSpec& a, const dataplane::FlowSpec& b) noexcept;

class FlowClaims {
public:
    // Takes spec on `iface` for `s`; returns who holds an overlapping flow
    // already (s itself, for the same flow it has) and takes nothing then.
    const Session* claim(const Iface& iface, const dataplane::FlowSpec& spec, const Session* s);
    void release(const Iface& iface, const dataplane::FlowSpec& spec) noexcept;

private:
    struct Port {
        const Iface* iface;
        uint16_t port;
        auto operator<=>(const Port&) const = default;
    };
    struct Claim {
        const Session* session;
        dataplane::FlowSpec spec;
    };
    std::map<Port, std::vector<Claim>> ports_;
};

} // namespace npf::daemon
