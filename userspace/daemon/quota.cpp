#include "daemon/quota.h"

#include <utility>

namespace npf::daemon {
namespace {

std::string bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

} // namespace

Quotas::Lease::Lease(Lease&& o) noexcept
    : q_(std::exchange(o.q_, nullptr)), rule_(o.rule_), regionBytes_(o.regionBytes_),
      residentBytes_(o.residentBytes_), flows_(o.flows_)
{
}

Quotas::Lease& Quotas::Lease::operator=(Lease&& o) noexcept
{
    if (this != &o) {
        giveAll();
        q_ = std::exchange(o.q_, nullptr);
        rule_ = o.rule_;
        regionBytes_ = o.regionBytes_;
        residentBytes_ = o.residentBytes_;
        flows_ = o.flows_;
    }
    return *this;
}

Quotas::Lease::~Lease() { giveAll(); }

void Quotas::Lease::giveAll() noexcept
{
    if (!q_)
        return;
    giveRegion();
    while (flows_)
        giveFlow();
    Use& u = q_->of(rule_);
    --u.connections;
    if (!u.connections)
        q_->use_.erase(rule_);
    q_ = nullptr;
}

bool Quotas::Lease::takeRegion(uint64_t size, uint64_t budget, std::string* why)
{
    Use& u = q_->of(rule_);
    const ClientRule& r = *rule_;
    if (size > r.regionBytes - u.regionBytes) {
        *why = "region of " + bytes(size) + ": this client's rule allows " + bytes(r.regionBytes) +
               " of region to all its connections together, and they hold " + bytes(u.regionBytes);
        return false;
    }
    if (budget > r.residentBytes - u.residentBytes) {
        *why = "resident budget of " + bytes(budget) + ": this client's rule allows " + bytes(r.residentBytes) +
               " of budget to all its connections together, and they hold " + bytes(u.residentBytes);
        return false;
    }
    u.regionBytes += size;
    u.residentBytes += budget;
    regionBytes_ = size;
    residentBytes_ = budget;
    return true;
}

void Quotas::Lease::giveRegion() noexcept
{
    Use& u = q_->of(rule_);
    u.regionBytes -= regionBytes_;
    u.residentBytes -= residentBytes_;
    regionBytes_ = residentBytes_ = 0;
}

bool Quotas::Lease::takeFlow(std::string* why)
{
    Use& u = q_->of(rule_);
    if (u.flows >= rule_->flows) {
        *why = "this client's rule allows " + std::to_string(rule_->flows) +
               " flows open at once to all its connections together, and they have them";
        return false;
    }
    ++u.flows;
    ++flows_;
    return true;
}

void Quotas::Lease::giveFlow() noexcept
{
    if (!flows_)
        return;
    --q_->of(rule_).flows;
    --flows_;
}

std::optional<Quotas::Lease> Quotas::admit(const ClientRule* rule, std::string* why)
{
    Use& u = of(rule);
    const uint32_t limit = rule ? rule->connections : kUnadmittedConnections;
    if (u.connections >= limit) {
        *why = rule ? "this client's rule allows " + std::to_string(limit) +
                          " connections at once, and they are all open"
                    : "no client rule of npfd's config admits this client (and " + std::to_string(limit) +
                          " such connections are open already)";
        if (!u.connections)
            use_.erase(rule);
        return std::nullopt;
    }
    ++u.connections;
    return Lease(this, rule);
}

Quotas::Use Quotas::use(const ClientRule* rule) const
{
    auto it = use_.find(rule);
    return it == use_.end() ? Use{} : it->second;
}

} // namespace npf::daemon
