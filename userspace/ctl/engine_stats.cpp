#include "ctl/engine_stats.h"
#include "ctl/pins.h"

#include <signal.h>

#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>

namespace npf::ctl {

std::string engineStatsPath(const std::string& ifname)
{
    // Keyed by network namespace like the pins (/run is not per namespace).
    const std::string ns = netnsDir();
    return "/run/npf/" + ns.substr(ns.rfind('/') + 1) + "/" + ifname + "/engine.json";
}

Counters engineCounters(const std::string& ifname)
{
    Counters out;
    std::ifstream in(engineStatsPath(ifname));
    if (!in)
        return out;
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j["pid"].is_number_integer())
        return out;
    const pid_t pid = j["pid"].get<pid_t>();
    if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
        return out; // left behind by an engine that was killed
    if (j["counters"].is_object())
        for (auto& [name, v] : j["counters"].items())
            if (v.is_number_unsigned())
                out.push_back({"engine", name, v.get<uint64_t>()});
    if (j["latency"].is_object())
        for (auto& [stage, q] : j["latency"].items())
            if (q.is_object())
                for (auto& [k, v] : q.items())
                    if (v.is_number_unsigned())
                        out.push_back({"latency", stage + "_" + k, v.get<uint64_t>()});
    return out;
}

} // namespace npf::ctl
