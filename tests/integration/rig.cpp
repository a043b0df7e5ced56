#include "rig.h"

#include <stdexcept>

#include "npf/abi.h"

namespace npf::itest {
namespace {

nlohmann::json parse(const RunResult& r)
{
    if (r.status != 0)
        throw std::runtime_error("command failed: " + describe(r));
    try {
        return nlohmann::json::parse(r.out);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string("bad JSON (") + e.what() + "): " + describe(r));
    }
}

void checkSent(const RunResult& r)
{
    if (r.status != 0)
        throw std::runtime_error("send failed: " + describe(r));
}

void checkShellSafe(const std::string& payload)
{
    for (char c : payload)
        if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
            throw std::invalid_argument("payload not shell-safe: " + payload);
}

} // namespace

Rig::Rig(test::VethOptions opt) : NpfVeth(opt, NPFCTL_PATH) {}

RunResult Rig::npfctl(const std::string& args, bool inRx)
{
    test::Netns& ns = inRx ? veth_.rxNs() : veth_.txNs();
    return run(ns.exec() + NPFCTL_PATH + " " + args);
}

nlohmann::json Rig::status()
{
    nlohmann::json all = parse(npfctl("status " + rxIf() + " --json"));
    if (!all.is_array() || all.size() != 1 || all[0].value("interface", "") != rxIf())
        throw std::runtime_error("status --json of " + rxIf() + " is not one object for it: " + all.dump());
    return all[0];
}

Counters Rig::counters()
{
    nlohmann::json j = parse(npfctl("stats " + rxIf() + " --json"));
    Counters c;
    for (auto& [name, v] : j.at("counters").at("xdp").items())
        c[name] = v.get<uint64_t>();
    return c;
}

nlohmann::json Rig::flows()
{
    nlohmann::json j = parse(npfctl("flow list " + rxIf() + " --json"));
    if (j.value("interface", "") != rxIf())
        throw std::runtime_error("flow list --json names another interface: " + j.dump());
    return j.at("flows");
}

nlohmann::json Rig::link()
{
    nlohmann::json j = parse(inRx("ip -j link show dev " + rxIf()));
    if (!j.is_array() || j.size() != 1)
        throw std::runtime_error("ip -j link show " + rxIf() + ": " + j.dump());
    return j[0];
}

void Rig::socatSend(const std::string& payload, uint16_t port)
{
    checkShellSafe(payload);
    checkSent(run("printf '%s' '" + payload + "' | " + veth_.txNs().exec() + "socat -u STDIN UDP4-SENDTO:" +
                  rxAddr() + ":" + std::to_string(port)));
}

void Rig::ncSend(const std::string& payload, uint16_t port)
{
    checkShellSafe(payload);
    checkSent(run("printf '%s' '" + payload + "' | " + veth_.txNs().exec() + "nc -u -w1 -q0 " + rxAddr() + " " +
                  std::to_string(port)));
}

::testing::AssertionResult outcomesMatch(const Counters& d, const Counters& expected, bool exact,
                                         const Counters& now)
{
    uint64_t sum = 0;
    for (const auto& [name, v] : now)
        if (name != "rx_total" && name != "truncated")
            sum += v;
    if (!now.count("rx_total") || now.at("rx_total") != sum)
        return ::testing::AssertionFailure() << "rx_total " << (now.count("rx_total") ? now.at("rx_total") : 0)
                                             << " != sum of outcomes " << sum;
    for (const auto& [name, want] : expected) {
        auto it = d.find(name);
        if (it == d.end())
            return ::testing::AssertionFailure() << "no counter " << name;
        if (exact ? it->second != want : it->second < want)
            return ::testing::AssertionFailure()
                   << name << " grew by " << it->second << ", expected " << (exact ? "" : ">= ") << want;
    }
    for (const auto& [name, v] : d) {
        if (expected.count(name))
            continue;
        bool mustBeZero = exact || name.rfind("drop_", 0) == 0 || name.rfind("redir_", 0) == 0 ||
                          name == "pass_no_socket" || name == "truncated";
        if (mustBeZero && v != 0)
            return ::testing::AssertionFailure() << name << " grew by " << v << ", expected 0";
    }
    return ::testing::AssertionSuccess();
}

} // namespace npf::itest
