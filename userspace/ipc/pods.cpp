#include "ipc/pods.h"

#include <arpa/inet.h>

#include "ipc/fields.h"
#include "ipc/schema.h"

namespace npf::ipc {
namespace {

bool dnsName(std::string_view s, size_t max, bool dots) noexcept
{
    if (s.empty() || s.size() > max || s.front() == '-' || s.back() == '-' || s.front() == '.' || s.back() == '.')
        return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (dots && c == '.')))
            return false;
    return true;
}

} // namespace

bool isK8sNamespace(std::string_view s) noexcept { return dnsName(s, 63, false); }
bool isPodName(std::string_view s) noexcept { return dnsName(s, 253, true); }

bool isContainerId(std::string_view s) noexcept
{
    if (s.empty() || s.size() > kMaxContainerId)
        return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return false;
    return true;
}

std::string canonicalAddr(std::string_view text)
{
    if (text.empty() || text.size() > kMaxAddr)
        return "";
    const std::string t(text);
    unsigned char buf[16];
    char out[INET6_ADDRSTRLEN];
    for (int family : {AF_INET, AF_INET6})
        if (::inet_pton(family, t.c_str(), buf) == 1 && ::inet_ntop(family, buf, out, sizeof(out)))
            return out;
    return "";
}

std::string PodInfo::addrList() const
{
    std::string out;
    for (const std::string& a : addrs)
        out += (out.empty() ? "" : ", ") + a;
    return out;
}

bool PodInfo::owns(std::string_view addr) const
{
    const std::string a = canonicalAddr(addr);
    if (a.empty())
        return false;
    for (const std::string& mine : addrs)
        if (mine == a)
            return true;
    return false;
}

// ---- the messages' fields ---------------------------------------------

using namespace schema;

namespace {

bool noControl(std::string_view s) noexcept { return !hasControl(s); }
std::string canonical(std::string_view s) { return canonicalAddr(s); }

// CNI_CONTAINERID: 1..kMaxContainerId bytes of letters, digits, '_', '.', '-'.
constexpr std::string_view kNotContainer = "is not a container id (letters, digits, '_', '.', '-')";

} // namespace

constexpr auto schemaOf(Tag<PodInfo>)
{
    return fields("pod_add",
                  Text<PodInfo>{"container", &PodInfo::container, kMaxContainerId, When::Required, isContainerId,
                                kNotContainer},
                  Text<PodInfo>{"namespace", &PodInfo::ns, 63, When::Required, isK8sNamespace,
                                "is not a Kubernetes namespace (a DNS label)"},
                  Text<PodInfo>{"name", &PodInfo::name, 253, When::Required, isPodName,
                                "is not a pod name (a DNS subdomain)"},
                  Text<PodInfo>{"uid", &PodInfo::uid, kMaxPodUid, When::Optional, noControl,
                                "contains control characters"},
                  TextList<PodInfo>{"addrs", &PodInfo::addrs, 1, kMaxPodAddrs, kMaxAddr, nullptr,
                                    "is not an IPv4 or IPv6 address", canonical});
}
constexpr auto schemaOf(Tag<PodAddRequest>) { return fields("pod_add", flat(&PodAddRequest::pod, schemaOf(Tag<PodInfo>{}))); }
constexpr auto schemaOf(Tag<PodDelRequest>)
{
    return fields("pod_del", Text<PodDelRequest>{"container", &PodDelRequest::container, kMaxContainerId,
                                                 When::Required, isContainerId, kNotContainer});
}
constexpr auto schemaOf(Tag<PodsRequest>) { return fields("pods"); }
constexpr auto schemaOf(Tag<PodsReply>)
{
    return fields("pods reply", TextList<PodsReply>{"containers", &PodsReply::containers, 0, SIZE_MAX,
                                                    kMaxContainerId, isContainerId, kNotContainer});
}

NPF_MESSAGE_CODEC(PodAddRequest)
NPF_MESSAGE_CODEC(PodDelRequest)
NPF_MESSAGE_CODEC(PodsRequest)
NPF_MESSAGE_CODEC(PodsReply)

} // namespace npf::ipc
