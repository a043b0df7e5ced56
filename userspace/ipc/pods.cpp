#include "ipc/pods.h"

#include <arpa/inet.h>

#include "ipc/fields.h"

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

std::string containerField(const Fields& f)
{
    std::string c = f.str("container", kMaxContainerId, true);
    if (!isContainerId(c))
        f.fail("container", "\"" + c + "\" is not a container id (1.." + std::to_string(kMaxContainerId) +
                                " bytes of letters, digits, '_', '.', '-')");
    return c;
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

std::string PodAddRequest::encode(uint32_t id) const
{
    return encodeMessage(kType, id,
                         {{"container", pod.container},
                          {"namespace", pod.ns},
                          {"name", pod.name},
                          {"uid", pod.uid},
                          {"addrs", pod.addrs}});
}

PodAddRequest PodAddRequest::decode(const Message& m)
{
    Fields f(m, kType, "pod_add");
    PodAddRequest r;
    r.pod.container = containerField(f);
    r.pod.ns = f.str("namespace", 63, true);
    if (!isK8sNamespace(r.pod.ns))
        f.fail("namespace", "\"" + r.pod.ns + "\" is not a Kubernetes namespace (a DNS label)");
    r.pod.name = f.str("name", 253, true);
    if (!isPodName(r.pod.name))
        f.fail("name", "\"" + r.pod.name + "\" is not a pod name (a DNS subdomain)");
    r.pod.uid = f.str("uid", kMaxPodUid, false);
    if (hasControl(r.pod.uid))
        f.fail("uid", "contains control characters");
    const Json& addrs = f.array("addrs");
    if (addrs.empty() || addrs.size() > kMaxPodAddrs)
        f.fail("addrs", "must list 1.." + std::to_string(kMaxPodAddrs) + " addresses, got " +
                            std::to_string(addrs.size()));
    for (const Json& a : addrs) {
        const std::string text = f.text("addrs", a, kMaxAddr);
        std::string canon = canonicalAddr(text);
        if (canon.empty())
            f.fail("addrs", "\"" + text + "\" is not an IPv4 or IPv6 address");
        r.pod.addrs.push_back(std::move(canon));
    }
    return r;
}

std::string PodDelRequest::encode(uint32_t id) const { return encodeMessage(kType, id, {{"container", container}}); }

PodDelRequest PodDelRequest::decode(const Message& m)
{
    Fields f(m, kType, "pod_del");
    return {containerField(f)};
}

std::string PodsRequest::encode(uint32_t id) const { return encodeMessage(kType, id, Json::object()); }

PodsRequest PodsRequest::decode(const Message& m)
{
    expectType(m, kType, "pods");
    return {};
}

std::string PodsReply::encode(uint32_t id) const { return encodeMessage(kType, id, {{"containers", containers}}); }

PodsReply PodsReply::decode(const Message& m)
{
    Fields f(m, kType, "pods reply");
    PodsReply r;
    for (const Json& c : f.array("containers")) {
        std::string id = f.text("containers", c, kMaxContainerId);
        if (!isContainerId(id))
            f.fail("containers", "\"" + id + "\" is not a container id");
        r.containers.push_back(std::move(id));
    }
    return r;
}

} // namespace npf::ipc
