// The pods protocol: how npf-cni (run by the container runtime as a pod's
// network is set up and torn down) tells npfd about a pod, over npfd's pods
// socket (config "pods_socket", root only). The transport and the message
// form are the client protocol's (protocol.h): one JSON object per
// SOCK_SEQPACKET record, "type" and "id", one reply "ok" or "error".
// docs/protocol.md ("Pods") is the reference.
//
//   pod_add + 1 descriptor, a listening AF_UNIX SOCK_SEQPACKET socket that
//           npf-cni bound to "@npf" inside the pod's network namespace:
//           {"container", "namespace", "name", "uid", "addrs": [...]}. Every
//           client that connects through it is that pod's.
//   pod_del {"container"}: the listener closed, the pod's clients
//           disconnected and their flows closed. Unknown containers are ok.
//   pods    {}: the reply's "containers" lists the pods npfd has listeners of.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/protocol.h"

namespace npf::ipc {

// The name npf-cni binds in a pod's network namespace; the pod's clients
// connect to it (npf::Client, npf-recv --connect @npf).
inline constexpr const char* kPodSocket = "@npf";

inline constexpr size_t kMaxContainerId = 256; // CNI_CONTAINERID: [A-Za-z0-9_.-]
inline constexpr size_t kMaxPodUid = 64;
inline constexpr size_t kMaxPodAddrs = 16;

// Kubernetes names: a namespace is a DNS label (RFC 1123, 63 bytes), a pod's
// name a DNS subdomain (253 bytes).
bool isK8sNamespace(std::string_view s) noexcept;
bool isPodName(std::string_view s) noexcept;
bool isContainerId(std::string_view s) noexcept;

// Who a pod is, as the container runtime told npf-cni: the container id of
// its sandbox (the key; CNI_CONTAINERID), its namespace and name
// (K8S_POD_NAMESPACE, K8S_POD_NAME), its uid (K8S_POD_UID, may be ""), its
// addresses (the previous plugin's result, as npfd compares them: canonical text).
struct PodInfo {
    std::string container;
    std::string ns, name, uid;
    std::vector<std::string> addrs;

    std::string describe() const { return "pod " + ns + "/" + name; }
    std::string addrList() const; // "198.18.0.1, 2001:db8::1"
    // `addr` (any IPv4 or IPv6 text) is one of addrs.
    bool owns(std::string_view addr) const;
};

struct PodAddRequest {
    static constexpr std::string_view kType = "pod_add";
    static constexpr size_t kFds = 1; // the listening socket
    using Reply = OkReply;
    PodInfo pod;
    std::string encode(uint32_t id) const;
    static PodAddRequest decode(const Message& m); // addresses made canonical
};

struct PodDelRequest {
    static constexpr std::string_view kType = "pod_del";
    static constexpr size_t kFds = 0;
    using Reply = OkReply;
    std::string container;
    std::string encode(uint32_t id) const;
    static PodDelRequest decode(const Message& m);
};

struct PodsReply {
    static constexpr std::string_view kType = "ok";
    static constexpr size_t kFds = 0;
    std::vector<std::string> containers;
    std::string encode(uint32_t id) const;
    static PodsReply decode(const Message& m);
};

struct PodsRequest {
    static constexpr std::string_view kType = "pods";
    static constexpr size_t kFds = 0;
    using Reply = PodsReply;
    std::string encode(uint32_t id) const;
    static PodsRequest decode(const Message& m);
};

// The canonical text of an IPv4 or IPv6 address ("0::1" -> "::1"), or ""
// when `text` is neither.
std::string canonicalAddr(std::string_view text);

} // namespace npf::ipc
