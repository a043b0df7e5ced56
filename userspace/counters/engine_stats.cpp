#include "counters/engine_stats.h"
#include "counters/flow_stats.h"
#include "dataplane/pins.h"

#include <signal.h>

#include <cerrno>
#include <fstream>

namespace npf::counters {
namespace {

// j[key], or null when j is not an object or lacks the key.
const Json& member(const Json& j, const char* key)
{
    static const Json none;
    if (!j.is_object())
        return none;
    auto it = j.find(key);
    return it != j.end() ? *it : none;
}

// j[key] when it is an unsigned number, else nullptr.
const Json* unsignedAt(const Json& j, const char* key)
{
    const Json& v = member(j, key);
    return v.is_number_unsigned() ? &v : nullptr;
}

// "counters" and "latency" of the engine's JSON.
void addEngineStats(Json& j, const EngineStats& s)
{
    Json& c = j["counters"] = Json::object();
    for (const auto& d : kEngineCounters)
        c[d.name] = s.*d.member;
    Json& l = j["latency"] = Json::object();
    for (const LatencyDef& d : kEngineLatencies) {
        Json& q = l[d.name] = Json::object();
        for (const QuantileDef& f : kLatencyFields)
            q[f.name] = (s.*d.member).*f.member;
    }
}

// The snapshot of the live engine serving ifname; null when there is none
// (no file, not JSON, or its writer is gone: left behind by a killed engine).
Json liveSnapshot(const std::string& ifname)
{
    std::ifstream in(engineStatsPath(ifname));
    if (!in)
        return {};
    Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!member(j, "pid").is_number_integer())
        return {};
    const pid_t pid = j["pid"].get<pid_t>();
    if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
        return {};
    return j;
}

} // namespace

std::string engineStatsPath(const std::string& ifname)
{
    // Keyed by network namespace like the pins (/run is not per namespace).
    const std::string ns = dataplane::netnsDir();
    return "/run/npf/" + ns.substr(ns.rfind('/') + 1) + "/" + ifname + "/engine.json";
}

Json engineStatsJson(const EngineStats& s, const std::string& ifname, pid_t pid, uint64_t timeNs)
{
    Json j;
    j["interface"] = ifname;
    j["pid"] = pid;
    j["time_ns"] = timeNs;
    addEngineStats(j, s);
    return j;
}

void addRegionStats(Json& j, const RegionStats& r)
{
    Json& out = j["region"] = Json::object();
    for (const auto& d : kRegionCounters)
        out[d.name] = r.*d.member;
}

EngineStats parseEngineStats(const Json& j)
{
    EngineStats s;
    for (const auto& d : kEngineCounters)
        if (const Json* v = unsignedAt(member(j, "counters"), d.name))
            s.*d.member = v->get<uint64_t>();
    for (const LatencyDef& d : kEngineLatencies)
        for (const QuantileDef& f : kLatencyFields)
            if (const Json* v = unsignedAt(member(member(j, "latency"), d.name), f.name))
                (s.*d.member).*f.member = v->get<uint64_t>();
    return s;
}

Json engineFlowJson(const EngineFlow& f)
{
    return {{"id", f.id}, {"gen", f.gen}, {"credits", f.credits}, {"stats", flowStatsJson(f.stats)}};
}

Counters engineCounters(const std::string& ifname)
{
    Counters out;
    const Json j = liveSnapshot(ifname);
    if (j.is_null())
        return out;
    for (const auto& d : kEngineCounters)
        if (const Json* v = unsignedAt(member(j, "counters"), d.name))
            out.push_back({"engine", d.name, v->get<uint64_t>()});
    for (const LatencyDef& d : kEngineLatencies)
        for (const QuantileDef& f : kLatencyFields)
            if (const Json* v = unsignedAt(member(member(j, "latency"), d.name), f.name))
                out.push_back({"latency", std::string(d.name) + "_" + f.name, v->get<uint64_t>()});
    for (const auto& d : kRegionCounters)
        if (const Json* v = unsignedAt(member(j, "region"), d.name))
            out.push_back({"region", d.name, v->get<uint64_t>()});
    return out;
}

std::optional<EngineFlows> engineFlows(const std::string& ifname)
{
    const Json j = liveSnapshot(ifname);
    if (j.is_null())
        return std::nullopt;
    EngineFlows out;
    out.pid = j["pid"].get<pid_t>();
    const Json& flows = member(j, "flows");
    if (!flows.is_array())
        return out;
    for (const Json& f : flows) {
        const Json *id = unsignedAt(f, "id"), *gen = unsignedAt(f, "gen");
        const Json& credits = member(f, "credits");
        if (!id || !gen || !credits.is_boolean())
            continue;
        try {
            out.flows.push_back({id->get<uint32_t>(), gen->get<uint32_t>(), credits.get<bool>(),
                                 parseFlowStats(member(f, "stats"))});
        } catch (const std::exception&) {
            // a malformed entry: left out
        }
    }
    return out;
}

void addCounters(Json& out, const EngineStats& s, std::initializer_list<EngineCounter> which)
{
    for (EngineCounter m : which)
        out[counterDef(m).name] = s.*m;
}

} // namespace npf::counters

namespace npf {

std::string toJson(const EngineStats& s)
{
    counters::Json j;
    counters::addEngineStats(j, s);
    return j.dump();
}

std::string formatCounters(const EngineStats& s, std::initializer_list<uint64_t EngineStats::*> which)
{
    // Appended piece by piece: a temporary '" " + std::string(...)' trips
    // GCC 12's bogus -Wrestrict at -O3 (GCC PR 105329).
    std::string out;
    for (uint64_t EngineStats::*m : which) {
        if (!out.empty())
            out += ' ';
        out += counterDef(m).name;
        out += '=';
        out += std::to_string(s.*m);
    }
    return out;
}

} // namespace npf
