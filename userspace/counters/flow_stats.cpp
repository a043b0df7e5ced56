#include "counters/flow_stats.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "dataplane/stats.h"

namespace npf::counters {
namespace {

const char* flowStatName(size_t i) { return dataplane::kStatNames[NPF_STAT_FLOW_FIRST + i]; }

template <size_t N>
bool in(const npf_stat (&which)[N], npf_stat s)
{
    return std::find(std::begin(which), std::end(which), s) != std::end(which);
}

bool picked(FlowOutcomes which, npf_stat s)
{
    switch (which) {
    case FlowOutcomes::Passed: return in(kFlowPassed, s);
    case FlowOutcomes::Dropped: return in(kFlowDroppedBeforeClaim, s) || in(kFlowLostAfterClaim, s);
    case FlowOutcomes::All: return true;
    }
    return false;
}

uint64_t unsignedAt(const Json& j, const char* key, const char* where)
{
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned())
        throw std::invalid_argument(std::string("flow stats: ") + where + key + " is missing or not an unsigned number");
    return it->get<uint64_t>();
}

} // namespace

Json flowStatsJson(const FlowStats& s)
{
    Json j;
    Json x = Json::object();
    for (size_t i = 0; i < s.xdp.size(); i++)
        x[flowStatName(i)] = s.xdp[i];
    j["xdp"] = x;
    for (const auto& c : kFlowCounters)
        j[c.name] = s.*c.member;
    j["reached"] = s.reached();
    j["passed"] = s.passed();
    j["dropped_in_xdp"] = s.droppedInXdp();
    j["claimed"] = s.claimed();
    j["socket_dropped"] = s.socketDropped();
    return j;
}

FlowStats parseFlowStats(const Json& j)
{
    if (!j.is_object())
        throw std::invalid_argument("flow stats: not an object");
    auto x = j.find("xdp");
    if (x == j.end() || !x->is_object())
        throw std::invalid_argument("flow stats: \"xdp\" is missing or not an object");
    FlowStats s;
    for (size_t i = 0; i < s.xdp.size(); i++)
        s.xdp[i] = unsignedAt(*x, flowStatName(i), "xdp.");
    for (const auto& c : kFlowCounters) {
        // An npfd from before credits sends none of theirs.
        if (std::string_view(c.name).starts_with("credit") && !j.contains(c.name))
            continue;
        s.*c.member = unsignedAt(j, c.name, "");
    }
    return s;
}

std::vector<std::pair<const char*, uint64_t>> flowOutcomes(const FlowStats& s, FlowOutcomes which)
{
    std::vector<std::pair<const char*, uint64_t>> out;
    for (size_t i = 0; i < s.xdp.size(); i++)
        if (picked(which, static_cast<npf_stat>(NPF_STAT_FLOW_FIRST + i)))
            out.emplace_back(flowStatName(i), s.xdp[i]);
    return out;
}

std::string formatFlowXdp(const FlowStats& s, FlowOutcomes which)
{
    std::string out;
    for (const auto& [name, n] : flowOutcomes(s, which)) {
        if (n == 0)
            continue;
        if (!out.empty())
            out += ' ';
        out += std::string(name) + "=" + std::to_string(n);
    }
    return out;
}

} // namespace npf::counters

namespace npf {

std::string toJson(const FlowStats& s) { return counters::flowStatsJson(s).dump(); }

std::string formatXdpOutcomes(const FlowStats& s) { return counters::formatFlowXdp(s, counters::FlowOutcomes::All); }

} // namespace npf
