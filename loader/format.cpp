#include "format.h"

#include <cinttypes>
#include <cstdio>

namespace npf::cli {
namespace {

std::string join(const std::vector<uint32_t>& v)
{
    if (v.empty())
        return "-";
    std::string s;
    // Appended piece by piece: `"," + std::to_string(x)` inserts at the front of
    // a temporary, which GCC 12 -O2 flags with a bogus -Wrestrict (GCC PR 105329).
    for (uint32_t x : v) {
        if (!s.empty())
            s += ',';
        s += std::to_string(x);
    }
    return s;
}

template <typename... Args>
std::string fmt(const char* f, Args... args)
{
    char buf[512];
    std::snprintf(buf, sizeof(buf), f, args...);
    return buf;
}

// The chained program as "<id>:<name>" (name unknown: "<id>:?"), or "-".
std::string next(const dataplane::InstanceStatus& s)
{
    if (!s.chained)
        return "-";
    return std::to_string(s.chained->id) + ":" + (s.chained->name.empty() ? "?" : s.chained->name);
}

} // namespace

std::string humanBytes(uint64_t b)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    size_t u = 0;
    while (v >= 1024 && u + 1 < std::size(units)) {
        v /= 1024;
        ++u;
    }
    return u == 0 ? fmt("%" PRIu64 " B", b) : fmt("%.1f %s", v, units[u]);
}

std::string attachSummary(const dataplane::AttachResult& r)
{
    std::string s = fmt("attached %s to %s: mode %s, prog id %u, queues %u, pins %s", NPF_PROG_NAME, r.ifname.c_str(),
                        dataplane::toString(r.mode), r.progId, r.queues, r.pinDir.c_str());
    if (r.chained)
        s += fmt("\nchained '%s' (prog id %u) behind %s%s; %s %s", r.chained->name.c_str(), r.chained->id,
                 NPF_PROG_NAME, r.tookOver ? ", in its place on the interface" : "", NPF_PROG_NAME,
                 r.frags ? "frags-aware" : "without frags support (the chained program lacks it)");
    return s;
}

std::string statusTable(const std::vector<dataplane::InstanceStatus>& rows)
{
    const char* f = "%-15s %-8s %-6s %-7s %-5s %-6s %-12s %-7s %s\n";
    std::string out = fmt(f, "INTERFACE", "STATE", "MODE", "PROG_ID", "FLOWS", "QUEUES", "BOUND_QUEUES",
                          "REGIONS", "NEXT");
    for (const dataplane::InstanceStatus& s : rows) {
        bool on = s.state == dataplane::InstanceState::Attached;
        out += fmt(f, s.ifname.c_str(), dataplane::toString(s.state), s.mode ? dataplane::toString(*s.mode) : "-",
                   on ? std::to_string(s.progId).c_str() : "-", on ? std::to_string(s.flows).c_str() : "-",
                   on && s.queues ? std::to_string(s.queues).c_str() : "-", join(s.boundQueues).c_str(),
                   on ? std::to_string(s.regions).c_str() : "-", next(s).c_str());
    }
    return out;
}

std::string flowTable(const std::vector<FlowRow>& rows)
{
    const char* f = "%-3s %-5s %-39s %-12s %-12s %-12s %-12s %-12s %-12s %-10s %s\n";
    std::string out = fmt(f, "ID", "PORT", "ADDR", "POSTED", "CONSUMED", "REACHED", "CLAIMED", "DROPPED", "PASSED",
                          "CREDITS", "HELD");
    for (const FlowRow& r : rows) {
        const dataplane::FlowInfo& x = r.xdp;
        std::string a = dataplane::addrString(x.spec);
        const FlowSums s = flowSums(x.xdp);
        const bool credits = r.engine && r.engine->credits;
        out += fmt(f, std::to_string(x.id).c_str(), std::to_string(x.spec.port).c_str(),
                   a.empty() ? "*" : a.c_str(), std::to_string(x.prod).c_str(), std::to_string(x.cons).c_str(),
                   std::to_string(s.reached).c_str(), std::to_string(s.claimed).c_str(),
                   std::to_string(s.dropped).c_str(), std::to_string(s.passed).c_str(),
                   credits ? std::to_string(r.engine->stats.creditsSent).c_str() : "-",
                   credits ? std::to_string(r.engine->stats.creditWaits).c_str() : "-");
    }
    return out;
}

std::vector<double> rates(const counters::Counters& prev, const counters::Counters& cur, double seconds)
{
    std::vector<double> r(cur.size(), 0.0);
    if (seconds <= 0)
        return r;
    for (size_t i = 0; i < cur.size(); ++i) {
        for (const counters::Counter& p : prev) {
            if (p.group == cur[i].group && p.name == cur[i].name) {
                // A counter that went backwards was reset (re-attach): rate from zero.
                uint64_t base = cur[i].value >= p.value ? p.value : 0;
                r[i] = static_cast<double>(cur[i].value - base) / seconds;
                break;
            }
        }
    }
    return r;
}

std::string counterTable(const counters::Counters& c, const std::vector<double>* perSecond)
{
    std::string out = perSecond ? fmt("%-36s %20s %14s\n", "COUNTER", "VALUE", "RATE/S")
                                : fmt("%-36s %20s\n", "COUNTER", "VALUE");
    for (size_t i = 0; i < c.size(); ++i) {
        std::string name = c[i].group + "." + c[i].name;
        if (perSecond)
            out += fmt("%-36s %20" PRIu64 " %14.1f\n", name.c_str(), c[i].value,
                       i < perSecond->size() ? (*perSecond)[i] : 0.0);
        else
            out += fmt("%-36s %20" PRIu64 "\n", name.c_str(), c[i].value);
    }
    return out;
}

Json statsJson(const std::string& ifname, uint32_t progId, const std::string& mode, const counters::Counters& c,
               const std::vector<double>* perSecond, double interval)
{
    Json j;
    j["interface"] = ifname;
    j["prog_id"] = progId;
    j["mode"] = mode;
    j["counters"] = toJson(c);
    if (perSecond) {
        Json r = Json::object();
        for (size_t i = 0; i < c.size() && i < perSecond->size(); ++i)
            r[c[i].group][c[i].name] = (*perSecond)[i];
        j["interval"] = interval;
        j["rates"] = r;
    }
    return j;
}

} // namespace npf::cli
