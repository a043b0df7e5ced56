#include "cli/json.h"

#include "dataplane/stats.h"
#include "npf/stats.h"

namespace npf::cli {

FlowSums flowSums(const dataplane::FlowXdpStats& x)
{
    FlowStats s;
    s.xdp = x;
    return {.reached = s.reached(),
            .claimed = s.claimed(),
            .dropped = s.droppedInXdp() + s.lostInXdp(),
            .passed = s.passed()};
}

Json toJson(const dataplane::InstanceStatus& s)
{
    Json j;
    j["interface"] = s.ifname;
    j["ifindex"] = s.ifindex;
    j["state"] = toString(s.state);
    j["mode"] = s.mode ? Json(toString(*s.mode)) : Json(nullptr);
    j["prog_id"] = s.progId;
    j["flows"] = s.flows;
    j["queues"] = s.queues;
    j["regions"] = s.regions;
    j["bound_queues"] = s.boundQueues;
    Json slots = Json::array();
    for (const dataplane::XskSlot& x : s.slots)
        slots.push_back({{"slot", x.slot}, {"queue", x.queue}, {"role", x.backup() ? "backup" : "primary"}});
    j["xsk_slots"] = slots;
    Json socks = Json::array();
    for (const dataplane::XdpSocket& x : s.sockets)
        socks.push_back({{"inode", x.inode}, {"queue", x.queue}, {"umem_id", x.umemId}, {"uid", x.uid}});
    j["sockets"] = socks;
    Json foreign = Json::array();
    for (const dataplane::XdpProgram& p : s.foreign)
        foreign.push_back({{"id", p.id}, {"name", p.name}, {"mode", toString(p.slot)}});
    j["foreign_programs"] = foreign;
    j["next_program"] = s.chained ? Json{{"id", s.chained->id}, {"name", s.chained->name}} : Json(nullptr);
    if (!s.problem.empty())
        j["problem"] = s.problem;
    return j;
}

Json toJson(const dataplane::FlowInfo& f)
{
    std::string addr = addrString(f.spec);
    const FlowSums sums = flowSums(f.xdp);
    Json xdp = Json::object();
    for (size_t i = 0; i < f.xdp.size(); i++)
        xdp[dataplane::kStatNames[NPF_STAT_FLOW_FIRST + i]] = f.xdp[i];
    return Json{{"id", f.id},
                {"port", f.spec.port},
                {"addr", addr.empty() ? Json(nullptr) : Json(addr)},
                {"family", f.spec.family},
                {"posted", f.prod},
                {"consumed", f.cons},
                {"reached", sums.reached},
                {"claimed", sums.claimed},
                {"dropped", sums.dropped},
                {"passed", sums.passed},
                {"xdp", xdp}};
}

Json toJson(const std::vector<dataplane::FlowInfo>& flows)
{
    Json a = Json::array();
    for (const dataplane::FlowInfo& f : flows)
        a.push_back(toJson(f));
    return a;
}

std::vector<FlowRow> flowRows(const std::vector<dataplane::FlowInfo>& flows,
                              const std::optional<counters::EngineFlows>& engine)
{
    std::vector<FlowRow> rows;
    for (const dataplane::FlowInfo& f : flows) {
        FlowRow& r = rows.emplace_back(f);
        if (engine)
            for (const counters::EngineFlow& e : engine->flows)
                if (e.id == f.id && e.gen == f.gen)
                    r.engine = e;
    }
    return rows;
}

Json toJson(const FlowRow& r)
{
    Json j = toJson(r.xdp);
    if (!r.engine) {
        j["engine"] = nullptr;
        return j;
    }
    Json e{{"credits", r.engine->credits}};
    for (const auto& c : kFlowCounters)
        e[c.name] = r.engine->stats.*c.member;
    j["engine"] = e;
    return j;
}

Json toJson(const std::vector<FlowRow>& rows)
{
    Json a = Json::array();
    for (const FlowRow& r : rows)
        a.push_back(toJson(r));
    return a;
}

Json toJson(const counters::Counters& c)
{
    Json j = Json::object();
    for (const counters::Counter& x : c)
        j[x.group][x.name] = x.value;
    return j;
}

} // namespace npf::cli
