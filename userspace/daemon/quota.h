// What the connections each client rule admits hold together, against the
// rule's limits: connections, region bytes, resident bytes, flows. A rule's
// limits are totals over all of its connections, so a tenant gets nothing
// more by connecting again. A pod rule's limits are each pod's: the totals of
// the connections that came through that pod's listener. Whatever a rule
// says, its connections (all its pods together) are at most its share of
// max_connections, so no tenant can take the connections every other one
// needs. Clients no rule admits share one small pool of connections: enough
// to be told so, not enough to hold npfd's descriptors.
// Control thread only.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "daemon/config.h"

namespace npf::daemon {

class Quotas {
public:
    // Connections open at once by clients that no rule admits.
    static constexpr uint32_t kUnadmittedConnections = 8;

    // `tenantShare`: the connections a rule's clients may hold at once, all
    // its pods together, whatever its own `connections` says (root's rule,
    // the operator's, excepted): DaemonConfig::tenantShare().
    explicit Quotas(uint32_t tenantShare = std::numeric_limits<uint32_t>::max()) noexcept : share_(tenantShare) {}

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
        // What the rule's totals (a pod rule's: the pod's) leave free now,
        // this connection's holdings taken out (the hello reply's "free").
        Use free() const;
        // The budget of a region whose client asks none: the rule's
        // resident limit shared equally by the connections it allows
        // (resident_bytes / connections), or what is free if that is less;
        // root's rule, which sets no limits, gets what is free. So every
        // connection a rule admits can take its default; a client that
        // wants more asks for it.
        uint64_t defaultBudget() const;

    private:
        friend class Quotas;
        Lease(Quotas* q, const ClientRule* rule, std::string pod) noexcept
            : q_(q), rule_(rule), pod_(std::move(pod))
        {
        }
        void giveAll() noexcept;
        Use& use() { return q_->of(rule_, pod_); }
        Use used() const { return q_->use(rule_, pod_); }
        std::string holder() const; // "its connections", or a pod rule's "the pod's connections"

        Quotas* q_ = nullptr;
        const ClientRule* rule_ = nullptr;
        std::string pod_; // the pod (its container id) whose totals it counts in; "" = the rule's
        uint64_t regionBytes_ = 0, residentBytes_ = 0;
        uint32_t flows_ = 0;
    };

    // A lease for a new connection admitted by `rule` (nullptr: no rule),
    // or nullopt and *why when its connections are all taken. `pod`: the
    // pod's container id for a pod rule's connection (its own totals).
    std::optional<Lease> admit(const ClientRule* rule, std::string* why, const std::string& pod = "");
    Use use(const ClientRule* rule, const std::string& pod = "") const;

private:
    using Key = std::pair<const ClientRule*, std::string>;
    Use& of(const ClientRule* rule, const std::string& pod) { return use_[Key(rule, pod)]; }
    // Why `rule` may not have one more connection (its pod's `u`), or "".
    std::string full(const ClientRule* rule, const std::string& pod, const Use& u) const;
    uint32_t share_;
    std::map<Key, Use> use_;
    std::map<const ClientRule*, uint32_t> tenants_; // connections of each rule, all its pods
};

} // namespace npf::daemon
