// npf-cni's side of the CNI protocol (the Container Network Interface
// specification, 1.0): what the runtime passes (CNI_* environment, the
// network configuration on stdin with the previous plugin's result), what a
// plugin prints (the result, passed on; an error object), and the pod a call
// names. No kernel work here: handover.h does that.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ipc/pods.h"

namespace npf::cni {

using Json = nlohmann::ordered_json;

// CNI error codes (the specification's well-known ones, and npf-cni's own).
enum class Code : int {
    IncompatibleVersion = 1,
    UnsupportedField = 2,
    UnknownContainer = 3,
    InvalidEnvironment = 4,
    IoFailure = 5,
    DecodeFailure = 6,
    InvalidNetworkConfig = 7,
    TryAgainLater = 11,
    NpfdRefused = 100, // npfd answered pod_add with an error
};

// A call that cannot be served: printed as the specification's error object.
class CniError : public std::runtime_error {
public:
    CniError(Code code, const std::string& msg, std::string details = "")
        : std::runtime_error(msg), code_(code), details_(std::move(details))
    {
    }
    Code code() const noexcept { return code_; }
    const std::string& details() const noexcept { return details_; }

private:
    Code code_;
    std::string details_;
};

inline constexpr const char* kDefaultPodsSocket = "/run/npf/pods.sock";
inline constexpr const char* kDefaultStateDir = "/var/lib/npf/cni";
// The versions this plugin speaks (VERSION's "supportedVersions").
inline constexpr const char* kSupportedVersions[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0"};

// One invocation: the CNI_* variables and the configuration.
struct Call {
    std::string command;     // CNI_COMMAND: ADD, DEL, CHECK, VERSION
    std::string containerId; // CNI_CONTAINERID
    std::string netns;       // CNI_NETNS (a path; may be empty on DEL)
    std::string ifname;      // CNI_IFNAME
    std::map<std::string, std::string> args; // CNI_ARGS, K=V;K=V
    Json config;             // stdin (VERSION: may be empty)
    std::string cniVersion;  // config's "cniVersion"
    std::string podsSocket = kDefaultPodsSocket; // config "socket"
    std::string stateDir = kDefaultStateDir;     // config "state_dir"
};

// `getenv` reads one variable (nullptr: unset). Throws CniError naming
// what is missing or malformed.
Call parseCall(const std::function<const char*(const char*)>& getenv, std::string_view stdinText);

// CNI_ARGS ("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;..."): throws on a pair without '='.
std::map<std::string, std::string> parseArgs(std::string_view text);

// The pod an ADD names: the container id, K8S_POD_NAMESPACE, K8S_POD_NAME,
// K8S_POD_UID from CNI_ARGS, the addresses of prevResult's "ips" (prefix
// length dropped). Throws CniError when the call does not name a pod
// (npf-cni runs under a Kubernetes runtime) or carries no address (npf-cni
// is chained after the plugin that gives the pod its addresses).
ipc::PodInfo podOf(const Call& c);

// What ADD prints: prevResult, in the configuration's cniVersion.
Json addResult(const Call& c);
// VERSION's answer.
Json versionResult(std::string_view cniVersion);
// The specification's error object.
Json errorResult(std::string_view cniVersion, const CniError& e);

} // namespace npf::cni
