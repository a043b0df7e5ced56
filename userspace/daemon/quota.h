// What the connections each client rule admits hold together, against the
// rule's limits: connections, region bytes, resident bytes, flows. A rule's
// limits are totals over all of its connections, so a tenant gets nothing
// more by connecting again. Clients no rule admits share one small pool of
// connections: enough to be told so, not enough to hold npfd's descriptors.
// Control thread only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "daemon/config.h"

namespace npf::daemon {

class Quotas {
public:
    // Connections open at once by clients that no rule admits.
    static constexpr uint32_t kUnadmittedConnections = 8;

    struct Use {
        uint32_t connections = 0;
        uint64_t regionBytes = 0, residentBytes = 0;
        uint32_t flows = 0;
    };

    // One connection's share; it gives back what it holds when destroyed.
    class Lease {
    public:
        Lease() noexcept = default;
        Lease(Lease&& o) noexcept;
        Lease& operator=(Lease&& o) noexcept;
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease();

        // The rule that admitted the connection; nullptr: none did.
        const ClientRule* rule() const noexcept { return rule_; }
        // Takes a region of `size` bytes with a resident budget of `budget`;
        // false, and *why, when the rule's totals leave no room.
        bool takeRegion(uint64_t size, uint64_t budget, std::string* why);
        void giveRegion() noexcept;
        bool takeFlow(std::string* why);
        void giveFlow() noexcept;

    private:
        friend class Quotas;
        Lease(Quotas* q, const ClientRule* rule) noexcept : q_(q), rule_(rule) {}
        void giveAll() noexcept;

        Quotas* q_ = nullptr;
        const ClientRule* rule_ = nullptr;
        uint64_t regionBytes_ = 0, residentBytes_ = 0;
        uint32_t flows_ = 0;
    };

    // A lease for a new connection admitted by `rule` (nullptr: no rule),
    // or nullopt and *why when its connections are all taken.
    std::optional<Lease> admit(const ClientRule* rule, std::string* why);
    Use use(const ClientRule* rule) const;

private:
    Use& of(const ClientRule* rule) { return use_[rule]; }
    std::map<const ClientRule*, Use> use_;
};

} // namespace npf::daemon
