#include "daemon/quota.h"

#include <algorithm>
#include <utility>

namespace npf::daemon {
namespace {

constexpr uint64_t kPage = 4096;

std::string bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

} // namespace

Quotas::Lease::Lease(Lease&& o) noexcept
    : q_(std::exchange(o.q_, nullptr)), rule_(o.rule_), pod_(std::move(o.pod_)), regionBytes_(o.regionBytes_),
      residentBytes_(o.residentBytes_), flows_(o.flows_)
{
}

Quotas::Lease& Quotas::Lease::operator=(Lease&& o) noexcept
{
    if (this != &o) {
        giveAll();
        q_ = std::exchange(o.q_, nullptr);
        rule_ = o.rule_;
        pod_ = std::move(o.pod_);
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
    Use& u = use();
    --u.connections;
    if (!u.connections)
        q_->use_.erase(Key(rule_, pod_));
    if (!--q_->tenants_[rule_])
        q_->tenants_.erase(rule_);
    q_ = nullptr;
}

bool Quotas::Lease::takeRegion(uint64_t size, uint64_t budget, std::string* why)
{
    Use& u = use();
    const ClientRule& r = *rule_;
    if (size > r.regionBytes - u.regionBytes) {
        *why = "region of " + bytes(size) + ": this client's rule allows " + bytes(r.regionBytes) +
               " of region to all " + holder() + " together, and they hold " + bytes(u.regionBytes);
        return false;
    }
    if (budget > r.residentBytes - u.residentBytes) {
        *why = "resident budget of " + bytes(budget) + ": this client's rule allows " + bytes(r.residentBytes) +
               " of budget to all " + holder() + " together, and they hold " + bytes(u.residentBytes);
        return false;
    }
    u.regionBytes += size;
    u.residentBytes += budget;
    regionBytes_ = size;
    residentBytes_ = budget;
    return true;
}

std::string Quotas::Lease::holder() const { return pod_.empty() ? "its connections" : "the pod's connections"; }

void Quotas::Lease::giveRegion() noexcept
{
    Use& u = use();
    u.regionBytes -= regionBytes_;
    u.residentBytes -= residentBytes_;
    regionBytes_ = residentBytes_ = 0;
}

bool Quotas::Lease::takeFlow(std::string* why)
{
    Use& u = use();
    if (u.flows >= rule_->flows) {
        *why = "this client's rule allows " + std::to_string(rule_->flows) +
               " flows open at once to all " + holder() + " together, and they have them";
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
    --use().flows;
    --flows_;
}

Quotas::Use Quotas::Lease::free() const
{
    const Use u = used();
    const ClientRule& r = *rule_;
    return {r.connections - std::min(r.connections, u.connections), r.regionBytes - u.regionBytes,
            r.residentBytes - u.residentBytes, r.flows - std::min(r.flows, u.flows)};
}

uint64_t Quotas::Lease::defaultBudget() const
{
    const uint64_t free = this->free().residentBytes;
    if (rule_ == &rootRule())
        return free;
    const uint64_t share = rule_->residentBytes / std::max<uint32_t>(1, rule_->connections) / kPage * kPage;
    return std::min(free, std::max(share, kPage));
}

std::string Quotas::full(const ClientRule* rule, const std::string& pod, const Use& u) const
{
    const uint32_t limit = rule ? rule->connections : kUnadmittedConnections;
    if (u.connections >= limit)
        return rule ? "this client's rule allows " + std::to_string(limit) + " connections at once" +
                          (pod.empty() ? "" : " per pod") + ", and they are all open"
                    : "no client rule of npfd's config admits this client (and " + std::to_string(limit) +
                          " such connections are open already)";
    auto it = tenants_.find(rule);
    const uint32_t held = it == tenants_.end() ? 0 : it->second;
    if (rule != &rootRule() && held >= share_)
        return std::string(rule ? "this client's rule" : "clients no rule admits") + " hold " +
               std::to_string(held) + " connections" + (pod.empty() || !rule ? "" : ", all its pods together") +
               ": their share of npfd's max_connections (each rule's clients get at most that many, so that "
               "no tenant can take them all)";
    return "";
}

std::optional<Quotas::Lease> Quotas::admit(const ClientRule* rule, std::string* why, const std::string& pod)
{
    Use& u = of(rule, pod);
    if (std::string no = full(rule, pod, u); !no.empty()) {
        *why = std::move(no);
        if (!u.connections)
            use_.erase(Key(rule, pod));
        return std::nullopt;
    }
    ++u.connections;
    ++tenants_[rule];
    return Lease(this, rule, pod);
}

Quotas::Use Quotas::use(const ClientRule* rule, const std::string& pod) const
{
    auto it = use_.find(Key(rule, pod));
    return it == use_.end() ? Use{} : it->second;
}

} // namespace npf::daemon
