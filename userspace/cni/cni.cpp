#include "cni/cni.h"

#include <algorithm>

namespace npf::cni {
namespace {

bool supported(std::string_view v)
{
    return std::any_of(std::begin(kSupportedVersions), std::end(kSupportedVersions),
                       [&](const char* s) { return v == s; });
}

std::string required(const std::function<const char*(const char*)>& getenv, const char* name)
{
    const char* v = getenv(name);
    if (!v || !*v)
        throw CniError(Code::InvalidEnvironment, std::string(name) + " is not set (npf-cni is run by a container "
                                                                     "runtime, as a CNI plugin)");
    return v;
}

std::string stringKey(const Json& config, const char* key, const std::string& fallback)
{
    auto it = config.find(key);
    if (it == config.end() || it->is_null())
        return fallback;
    if (!it->is_string() || it->get_ref<const std::string&>().empty() || it->get_ref<const std::string&>()[0] != '/')
        throw CniError(Code::InvalidNetworkConfig, std::string("\"") + key + "\" must be an absolute path");
    return it->get<std::string>();
}

} // namespace

std::map<std::string, std::string> parseArgs(std::string_view text)
{
    std::map<std::string, std::string> out;
    while (!text.empty()) {
        const size_t semi = text.find(';');
        const std::string_view pair = text.substr(0, semi);
        text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
        if (pair.empty())
            continue;
        const size_t eq = pair.find('=');
        if (eq == std::string_view::npos || eq == 0)
            throw CniError(Code::InvalidEnvironment,
                           "CNI_ARGS: \"" + std::string(pair) + "\" is not KEY=VALUE (pairs separated by ';')");
        out[std::string(pair.substr(0, eq))] = std::string(pair.substr(eq + 1));
    }
    return out;
}

Call parseCall(const std::function<const char*(const char*)>& getenv, std::string_view stdinText)
{
    Call c;
    c.command = required(getenv, "CNI_COMMAND");
    if (c.command == "VERSION") {
        if (!stdinText.empty()) {
            Json j = Json::parse(stdinText, nullptr, false);
            if (j.is_object() && j.contains("cniVersion") && j["cniVersion"].is_string())
                c.cniVersion = j["cniVersion"].get<std::string>();
        }
        return c;
    }
    if (c.command != "ADD" && c.command != "DEL" && c.command != "CHECK")
        throw CniError(Code::InvalidEnvironment, "CNI_COMMAND \"" + c.command + "\": npf-cni knows ADD, DEL, CHECK, VERSION");
    c.containerId = required(getenv, "CNI_CONTAINERID");
    if (!ipc::isContainerId(c.containerId))
        throw CniError(Code::InvalidEnvironment, "CNI_CONTAINERID \"" + c.containerId + "\" is not a container id");
    if (const char* ns = getenv("CNI_NETNS"))
        c.netns = ns;
    if (c.command != "DEL" && c.netns.empty())
        throw CniError(Code::InvalidEnvironment, "CNI_NETNS is not set: " + c.command + " needs the pod's network namespace");
    if (const char* ifname = getenv("CNI_IFNAME"))
        c.ifname = ifname;
    if (const char* args = getenv("CNI_ARGS"))
        c.args = parseArgs(args);

    c.config = Json::parse(stdinText, nullptr, false);
    if (c.config.is_discarded() || !c.config.is_object())
        throw CniError(Code::DecodeFailure, "the network configuration on stdin is not a JSON object");
    auto v = c.config.find("cniVersion");
    if (v == c.config.end() || !v->is_string())
        throw CniError(Code::InvalidNetworkConfig, "the network configuration has no \"cniVersion\"");
    c.cniVersion = v->get<std::string>();
    if (!supported(c.cniVersion))
        throw CniError(Code::IncompatibleVersion, "cniVersion " + c.cniVersion + " is not one npf-cni speaks",
                       "supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0");
    c.podsSocket = stringKey(c.config, "socket", kDefaultPodsSocket);
    c.stateDir = stringKey(c.config, "state_dir", kDefaultStateDir);
    return c;
}

ipc::PodInfo podOf(const Call& c)
{
    ipc::PodInfo p;
    p.container = c.containerId;
    auto arg = [&](const char* key) {
        auto it = c.args.find(key);
        return it == c.args.end() ? std::string() : it->second;
    };
    p.ns = arg("K8S_POD_NAMESPACE");
    p.name = arg("K8S_POD_NAME");
    p.uid = arg("K8S_POD_UID");
    if (!ipc::isK8sNamespace(p.ns) || !ipc::isPodName(p.name))
        throw CniError(Code::InvalidEnvironment,
                       "CNI_ARGS names no pod: npf-cni needs K8S_POD_NAMESPACE and K8S_POD_NAME (set by the kubelet's "
                       "runtime), got \"" + p.ns + "\" and \"" + p.name + "\"");
    if (p.uid.size() > ipc::kMaxPodUid)
        throw CniError(Code::InvalidEnvironment, "CNI_ARGS: K8S_POD_UID is longer than " +
                                                     std::to_string(ipc::kMaxPodUid) + " bytes");
    auto prev = c.config.find("prevResult");
    if (prev == c.config.end() || !prev->is_object())
        throw CniError(Code::InvalidNetworkConfig,
                       "no prevResult: npf-cni is a chained plugin, listed after the one that gives the pod its addresses");
    auto ips = prev->find("ips");
    if (ips != prev->end() && ips->is_array())
        for (const Json& ip : *ips) {
            auto a = ip.find("address");
            if (a == ip.end() || !a->is_string())
                continue;
            const std::string cidr = a->get<std::string>();
            const std::string addr = ipc::canonicalAddr(cidr.substr(0, cidr.find('/')));
            if (addr.empty())
                throw CniError(Code::DecodeFailure, "prevResult: \"" + cidr + "\" is not an address");
            if (std::find(p.addrs.begin(), p.addrs.end(), addr) == p.addrs.end())
                p.addrs.push_back(addr);
        }
    if (p.addrs.empty())
        throw CniError(Code::InvalidNetworkConfig, "prevResult has no \"ips\": the pod has no address to bind its flows to");
    if (p.addrs.size() > ipc::kMaxPodAddrs)
        throw CniError(Code::InvalidNetworkConfig, "prevResult lists " + std::to_string(p.addrs.size()) +
                                                       " addresses, npfd takes " +
                                                       std::to_string(ipc::kMaxPodAddrs));
    return p;
}

Json addResult(const Call& c)
{
    Json r = c.config.contains("prevResult") ? c.config["prevResult"] : Json::object();
    r["cniVersion"] = c.cniVersion;
    return r;
}

Json versionResult(std::string_view cniVersion)
{
    Json v = Json::array();
    for (const char* s : kSupportedVersions)
        v.push_back(s);
    return {{"cniVersion", cniVersion.empty() ? "1.0.0" : std::string(cniVersion)}, {"supportedVersions", v}};
}

Json errorResult(std::string_view cniVersion, const CniError& e)
{
    Json j = {{"cniVersion", cniVersion.empty() ? "1.0.0" : std::string(cniVersion)},
              {"code", static_cast<int>(e.code())},
              {"msg", e.what()}};
    if (!e.details().empty())
        j["details"] = e.details();
    return j;
}

} // namespace npf::cni
