#include "counters/flow_stats.h"

#include <stdexcept>

#include "dataplane/stats.h"

namespace npf::counters {
namespace {

const char* flowStatName(size_t i) { return dataplane::kStatNames[NPF_STAT_FLOW_FIRST + i]; }

bool isDrop(npf_stat s) { return s >= NPF_STAT_DROP_RNR && s <= NPF_STAT_DROP_CSUM; }
bool isPass(npf_stat s)
{
    return s == NPF_STAT_PASS_BAD_QUEUE || s == NPF_STAT_PASS_NO_SOCKET || s == NPF_STAT_PASS_TOO_BIG ||
           s == NPF_STAT_PASS_META_FAIL;
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
    for (const auto& c : kFlowCounters)
        s.*c.member = unsignedAt(j, c.name, "");
    return s;
}

std::string formatFlowXdp(const FlowStats& s, FlowOutcomes which)
{
    std::string out;
    for (size_t i = 0; i < s.xdp.size(); i++) {
        const auto st = static_cast<npf_stat>(NPF_STAT_FLOW_FIRST + i);
        const bool pick = which == FlowOutcomes::All || (which == FlowOutcomes::Passed && isPass(st)) ||
                          (which == FlowOutcomes::Dropped && (isDrop(st) || st == NPF_STAT_REDIR_FAIL));
        if (!pick || s.xdp[i] == 0)
            continue;
        if (!out.empty())
            out += ' ';
        out += std::string(flowStatName(i)) + "=" + std::to_string(s.xdp[i]);
    }
    return out;
}

} // namespace npf::counters
