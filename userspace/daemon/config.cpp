#include "daemon/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <set>

#include "ipc/pods.h"     // isK8sNamespace, isPodName
#include "ipc/protocol.h" // Json, describeValue, isInterfaceName, kMaxIfaces
#include "npf/abi.h"
#include "sys/error.h"
#include "sys/fd.h"

namespace npf::daemon {

// The protocol's JSON type and its checks of values and names.
using ipc::describeValue;
using ipc::isInterfaceName;
using ipc::Json;
using ipc::kMaxIfaces;

namespace {

constexpr uint64_t kPage = NPF_PAGE_SIZE;
constexpr uint64_t kMaxRegionBytes = NPF_MAX_REGION_PAGES << NPF_PAGE_SHIFT;

// Error messages: "<origin>: <key path>: <problem>".
class Ctx {
public:
    explicit Ctx(const std::string& origin) : origin_(origin) {}

    [[noreturn]] void fail(const std::string& path, const std::string& problem) const
    {
        throw ArgumentError(origin_ + ": " + (path.empty() ? "" : path + ": ") + problem);
    }

    uint64_t number(const std::string& path, const Json& v, uint64_t min, uint64_t max) const
    {
        if (!v.is_number_unsigned())
            fail(path, "must be an unsigned integer, got " + describeValue(v));
        uint64_t n = v.get<uint64_t>();
        if (n < min || n > max)
            fail(path, std::to_string(n) + " is out of range " + std::to_string(min) + ".." + std::to_string(max));
        return n;
    }

    const std::string& string(const std::string& path, const Json& v) const
    {
        if (!v.is_string())
            fail(path, "must be a string, got " + describeValue(v));
        return v.get_ref<const std::string&>();
    }

    std::string absolutePath(const std::string& path, const Json& v, size_t max) const
    {
        const std::string& s = string(path, v);
        if (s.empty() || s[0] != '/')
            fail(path, "\"" + s + "\" must be an absolute path");
        if (s.size() > max)
            fail(path, "longer than " + std::to_string(max) + " bytes");
        return s;
    }

private:
    const std::string& origin_;
};

// Parses JSON with comments and refuses duplicate keys (nlohmann would keep
// one of them silently), naming the key's path.
Json parseStrict(std::string_view text, const Ctx& ctx)
{
    struct Frame {
        bool object;
        std::set<std::string> keys;
        std::string key;
        long index = -1;
    };
    std::vector<Frame> frames;
    auto pathOf = [&](size_t depth) {
        std::string p;
        for (size_t i = 0; i < depth; ++i) {
            if (frames[i].object)
                p += (p.empty() ? "" : ".") + frames[i].key;
            else
                p += "[" + std::to_string(frames[i].index) + "]";
        }
        return p;
    };
    Json::parser_callback_t cb = [&](int, Json::parse_event_t ev, Json& parsed) {
        switch (ev) {
        case Json::parse_event_t::object_start:
        case Json::parse_event_t::array_start:
            if (!frames.empty() && !frames.back().object)
                ++frames.back().index;
            frames.push_back({ev == Json::parse_event_t::object_start, {}, {}, -1});
            break;
        case Json::parse_event_t::object_end:
        case Json::parse_event_t::array_end:
            frames.pop_back();
            break;
        case Json::parse_event_t::key: {
            Frame& f = frames.back();
            f.key = parsed.get<std::string>();
            if (!f.keys.insert(f.key).second)
                ctx.fail(pathOf(frames.size()), "duplicate key");
            break;
        }
        case Json::parse_event_t::value:
            if (!frames.empty() && !frames.back().object)
                ++frames.back().index;
            break;
        }
        return true;
    };
    try {
        return Json::parse(text.begin(), text.end(), cb, true, true);
    } catch (const Json::parse_error& e) {
        std::string what = e.what();
        if (size_t p = what.find("] "); what.starts_with("[json.exception") && p != std::string::npos)
            what = what.substr(p + 2);
        ctx.fail("", "not valid JSON: " + what);
    }
}

struct Addr {
    int family = 0;
    std::array<unsigned char, 16> bytes{};
};

std::optional<Addr> parseAddr(std::string_view text)
{
    std::string s(text);
    Addr a;
    if (::inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1)
        a.family = AF_INET;
    else if (::inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1)
        a.family = AF_INET6;
    else
        return std::nullopt;
    return a;
}

std::optional<uint16_t> portNumber(std::string_view s)
{
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v > 65535)
        return std::nullopt;
    return static_cast<uint16_t>(v);
}

PortRange parsePorts(const Ctx& ctx, const std::string& path, const Json& v)
{
    if (v.is_number_unsigned()) {
        uint16_t p = static_cast<uint16_t>(ctx.number(path, v, 1, 65535));
        return {p, p};
    }
    if (!v.is_string())
        ctx.fail(path, "must be a port (\"5000\", 5000) or a range (\"9000-9099\"), got " + describeValue(v));
    const std::string& s = v.get_ref<const std::string&>();
    const std::string quoted = "\"" + s + "\": ";
    size_t dash = s.find('-');
    std::optional<uint16_t> first = portNumber(std::string_view(s).substr(0, dash));
    std::optional<uint16_t> last =
        dash == std::string::npos ? first : portNumber(std::string_view(s).substr(dash + 1));
    if (!first || !last)
        ctx.fail(path, quoted + "not a port in 1..65535 or a range of them (\"9000-9099\")");
    if (*first == 0 || *last == 0)
        ctx.fail(path, quoted + "port 0 is not a port (1..65535)");
    if (*first > *last)
        ctx.fail(path, quoted + "first port above last");
    return {*first, *last};
}

std::optional<uint32_t> parseId(const Ctx& ctx, const std::string& path, const Json& v)
{
    if (v.is_null())
        return std::nullopt;
    // (uid_t)-1 means "no change" to the kernel, never a user.
    return static_cast<uint32_t>(ctx.number(path, v, 0, std::numeric_limits<uint32_t>::max() - 1));
}

PodPattern parsePodPattern(const Ctx& ctx, const std::string& path, const std::string& text)
{
    const size_t slash = text.find('/');
    if (slash == std::string::npos)
        ctx.fail(path, "\"" + text + "\" must be NAMESPACE/NAME (either may be *), e.g. \"tenant-a/*\"");
    PodPattern p{text.substr(0, slash), text.substr(slash + 1)};
    if (p.ns == "*")
        p.ns.clear();
    else if (!ipc::isK8sNamespace(p.ns))
        ctx.fail(path, "\"" + p.ns + "\" is not a Kubernetes namespace (a DNS label) or *");
    if (p.name == "*")
        p.name.clear();
    else if (!ipc::isPodName(p.name))
        ctx.fail(path, "\"" + p.name + "\" is not a pod name (a DNS subdomain) or *");
    return p;
}

ClientRule parseRule(const Ctx& ctx, const std::string& path, const Json& v)
{
    if (!v.is_object())
        ctx.fail(path, "must be an object, got " + describeValue(v));
    ClientRule r;
    bool ports = false, region = false, resident = false;
    for (const auto& [k, x] : v.items()) {
        const std::string p = path + "." + k;
        if (k == "uid") {
            r.uid = parseId(ctx, p, x);
        } else if (k == "gid") {
            r.gid = parseId(ctx, p, x);
        } else if (k == "cgroup") {
            if (x.is_null())
                continue;
            std::string c = ctx.string(p, x);
            if (c.empty() || c[0] != '/')
                ctx.fail(p, "\"" + c + "\" must be a cgroup v2 path starting with '/' (as in /proc/PID/cgroup)");
            while (c.size() > 1 && c.back() == '/')
                c.pop_back();
            r.cgroup = std::move(c);
        } else if (k == "pod") {
            if (x.is_null())
                continue;
            r.pod = parsePodPattern(ctx, p, ctx.string(p, x));
        } else if (k == "ports") {
            if (!x.is_array() || x.empty())
                ctx.fail(p, "must be a non-empty array of ports and ranges, e.g. [\"9000-9099\", \"5000\"]");
            for (size_t i = 0; i < x.size(); ++i)
                r.ports.push_back(parsePorts(ctx, p + "[" + std::to_string(i) + "]", x[i]));
            ports = true;
        } else if (k == "addr") {
            r.addr = ctx.string(p, x);
            if (!r.addr.empty() && !parseAddr(r.addr))
                ctx.fail(p, "\"" + r.addr + "\" is not an IPv4 or IPv6 address (\"\" = any)");
        } else if (k == "region_bytes") {
            r.regionBytes = ctx.number(p, x, kPage, kMaxRegionBytes);
            if (r.regionBytes % kPage)
                ctx.fail(p, std::to_string(r.regionBytes) + " is not a multiple of " + std::to_string(kPage));
            region = true;
        } else if (k == "resident_bytes") {
            r.residentBytes = ctx.number(p, x, kPage, kMaxRegionBytes);
            if (r.residentBytes % kPage)
                ctx.fail(p, std::to_string(r.residentBytes) + " is not a multiple of " + std::to_string(kPage));
            resident = true;
        } else if (k == "flows") {
            r.flows = static_cast<uint32_t>(ctx.number(p, x, 1, std::numeric_limits<uint32_t>::max()));
        } else if (k == "connections") {
            r.connections = static_cast<uint32_t>(ctx.number(p, x, 1, kMaxConnections));
        } else {
            ctx.fail(p, "unknown key (known: uid, gid, cgroup, pod, ports, addr, region_bytes, resident_bytes, "
                        "flows, connections)");
        }
    }
    if (!r.uid && !r.gid && !r.cgroup && !r.pod)
        ctx.fail(path, "matches nobody: give at least one of \"uid\", \"gid\", \"cgroup\", \"pod\"");
    if (!ports)
        ctx.fail(path + ".ports", "missing: list the ports this client may open");
    if (r.residentBytes > r.regionBytes)
        ctx.fail(path + (resident ? ".resident_bytes" : ".region_bytes"),
                 "resident_bytes " + std::to_string(r.residentBytes) + " is above region_bytes " +
                     std::to_string(r.regionBytes) + (region && resident ? "" : " (a default)"));
    return r;
}

bool validGroupName(std::string_view s) noexcept
{
    if (s.empty() || s.size() > 32)
        return false;
    for (unsigned char c : s)
        if (c <= ' ' || c == ':' || c == 0x7f)
            return false;
    return true;
}

} // namespace

const ClientRule& rootRule()
{
    static const ClientRule r = [] {
        ClientRule x;
        x.uid = 0;
        x.ports = {{1, 65535}};
        x.regionBytes = std::numeric_limits<uint64_t>::max();
        x.residentBytes = std::numeric_limits<uint64_t>::max();
        x.flows = std::numeric_limits<uint32_t>::max();
        x.connections = std::numeric_limits<uint32_t>::max(); // max_connections bounds root
        return x;
    }();
    return r;
}

uint32_t DaemonConfig::tenantShare() const noexcept
{
    return std::max<uint32_t>(1, maxConnections / static_cast<uint32_t>(clients.size() + 1));
}

bool PodPattern::matches(const PodName& p) const noexcept
{
    return (ns.empty() || ns == p.ns) && (name.empty() || name == p.name);
}

bool ClientRule::matches(uid_t u, gid_t g, std::string_view cg, const PodName* p) const
{
    if (bool(pod) != bool(p) || (pod && !pod->matches(*p)))
        return false;
    if (uid && *uid != u)
        return false;
    if (gid && *gid != g)
        return false;
    if (cgroup) {
        const std::string& c = *cgroup;
        if (cg.empty() || !cg.starts_with(c))
            return false;
        if (cg.size() != c.size() && c != "/" && cg[c.size()] != '/')
            return false;
    }
    return true;
}

bool ClientRule::allowsPort(uint16_t port) const
{
    for (const PortRange& r : ports)
        if (port >= r.first && port <= r.last)
            return true;
    return false;
}

bool ClientRule::allowsAddr(std::string_view a) const
{
    if (addr.empty())
        return true;
    if (a.empty())
        return false;
    std::optional<Addr> want = parseAddr(addr), got = parseAddr(a);
    return want && got && want->family == got->family && want->bytes == got->bytes;
}

const ClientRule* DaemonConfig::match(uid_t uid, gid_t gid, std::string_view cgroup, const PodName* pod) const
{
    for (const ClientRule& r : clients)
        if (r.matches(uid, gid, cgroup, pod))
            return &r;
    if (uid == 0 && allowRoot && !pod)
        return &rootRule();
    return nullptr;
}

std::optional<IfaceSpec> parseIfaceSpec(std::string_view text, std::string* why)
{
    const size_t colon = text.rfind(':');
    IfaceSpec s;
    s.ifname = std::string(colon == std::string_view::npos ? text : text.substr(colon + 1));
    if (!isInterfaceName(s.ifname)) {
        *why = (colon == std::string_view::npos ? "" : "\"" + std::string(text) + "\": ") + "\"" + s.ifname +
               "\" is not an interface name (NAME or NETNS:NAME)";
        return std::nullopt;
    }
    if (colon == std::string_view::npos)
        return s;
    const std::string_view ns = text.substr(0, colon);
    if (ns.starts_with('/')) {
        s.netns = std::string(ns);
    } else if (!ns.empty() && ns != "." && ns != ".." && ns.find('/') == std::string_view::npos) {
        s.netns = "/run/netns/" + std::string(ns);
    } else {
        *why = "\"" + std::string(text) + "\": the network namespace must be a name under /run/netns or an "
               "absolute path (NETNS:NAME)";
        return std::nullopt;
    }
    return s;
}

bool DaemonConfig::delegated(const std::string& label) const
{
    return std::find(delegate.begin(), delegate.end(), label) != delegate.end();
}

DaemonConfig parseConfig(std::string_view text, const std::string& origin)
{
    const Ctx ctx(origin);
    Json root = parseStrict(text, ctx);
    if (!root.is_object())
        ctx.fail("", "must be a JSON object, got " + describeValue(root));

    DaemonConfig c;
    bool ifaces = false;
    for (const auto& [k, v] : root.items()) {
        if (k == "ifaces") {
            if (!v.is_array() || v.empty() || v.size() > kMaxIfaces)
                ctx.fail(k, "must be an array of 1.." + std::to_string(kMaxIfaces) + " interface names");
            for (size_t i = 0; i < v.size(); ++i) {
                const std::string p = k + "[" + std::to_string(i) + "]";
                const std::string& name = ctx.string(p, v[i]);
                if (std::string why; !parseIfaceSpec(name, &why))
                    ctx.fail(p, why);
                for (const std::string& seen : c.ifaces)
                    if (seen == name)
                        ctx.fail(p, "\"" + name + "\" is listed twice");
                c.ifaces.push_back(name);
            }
            ifaces = true;
        } else if (k == "delegate") {
            if (!v.is_array() || v.size() > kMaxIfaces)
                ctx.fail(k, "must be an array of interfaces from \"ifaces\"");
            for (size_t i = 0; i < v.size(); ++i) {
                const std::string p = k + "[" + std::to_string(i) + "]";
                const std::string& name = ctx.string(p, v[i]);
                if (c.delegated(name))
                    ctx.fail(p, "\"" + name + "\" is listed twice");
                c.delegate.push_back(name);
            }
        } else if (k == "socket") {
            c.socket = ctx.absolutePath(k, v, sizeof(sockaddr_un::sun_path) - 1);
        } else if (k == "socket_group") {
            if (v.is_null())
                c.socketGroup.clear();
            else if (v.is_number_unsigned())
                c.socketGroup = std::to_string(ctx.number(k, v, 0, std::numeric_limits<uint32_t>::max() - 1));
            else if (v.is_string() && validGroupName(v.get_ref<const std::string&>()))
                c.socketGroup = v.get<std::string>();
            else
                ctx.fail(k, "must be a group name or a gid, got " + describeValue(v));
        } else if (k == "spill_dir") {
            c.spillDir = ctx.absolutePath(k, v, 4095);
        } else if (k == "allow_root") {
            if (!v.is_boolean())
                ctx.fail(k, "must be true or false, got " + describeValue(v));
            c.allowRoot = v.get<bool>();
        } else if (k == "max_connections") {
            c.maxConnections = static_cast<uint32_t>(ctx.number(k, v, 1, kMaxConnections));
        } else if (k == "hello_timeout_ms") {
            c.helloTimeoutMs = static_cast<uint32_t>(ctx.number(k, v, 100, 600000));
        } else if (k == "client_install_wait_us") {
            c.clientInstallWaitUs = static_cast<uint32_t>(ctx.number(k, v, 0, 100000));
        } else if (k == "pods_socket") {
            c.podsSocket = v.is_null() ? std::string() : ctx.absolutePath(k, v, sizeof(sockaddr_un::sun_path) - 1);
        } else if (k == "clients") {
            if (!v.is_array())
                ctx.fail(k, "must be an array of client rules, got " + describeValue(v));
            for (size_t i = 0; i < v.size(); ++i)
                c.clients.push_back(parseRule(ctx, k + "[" + std::to_string(i) + "]", v[i]));
        } else {
            ctx.fail(k, "unknown key (known: ifaces, delegate, socket, socket_group, spill_dir, allow_root, max_connections, "
                        "hello_timeout_ms, client_install_wait_us, pods_socket, clients)");
        }
    }
    if (!ifaces)
        ctx.fail("ifaces", "missing: list the interfaces npfd serves, e.g. \"ifaces\": [\"eth0\"]");
    for (size_t i = 0; i < c.delegate.size(); ++i)
        if (std::find(c.ifaces.begin(), c.ifaces.end(), c.delegate[i]) == c.ifaces.end())
            ctx.fail("delegate[" + std::to_string(i) + "]",
                     "\"" + c.delegate[i] + "\" is not one of \"ifaces\" (write it as it is written there)");
    if (!c.podsSocket.empty() && c.podsSocket == c.socket)
        ctx.fail("pods_socket", "\"" + c.podsSocket + "\" is the clients' socket too: give npf-cni a socket of its own");
    return c;
}

DaemonConfig loadConfig(const std::string& path)
{
    Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f)
        throwErrno("read config " + path);
    std::string text;
    char buf[16384];
    for (;;) {
        ssize_t n = ::read(f.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throwErrno("read config " + path);
        if (n == 0)
            break;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > (1u << 20))
            throw ArgumentError(path + ": larger than 1 MiB: not an npfd config");
    }
    return parseConfig(text, path);
}

} // namespace npf::daemon
