#include "dataplane/flows.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "dataplane/dataplane.h"
#include "dataplane/pins.h"
#include "dataplane/post_ring.h"
#include "dataplane/stats.h"
#include "sys/error.h"

namespace npf::dataplane {

uint16_t parsePort(const std::string& s)
{
    bool digits = !s.empty() && s.size() <= 5 &&
                  std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    unsigned long v = digits ? std::stoul(s) : 0;
    if (!digits || v < 1 || v > 65535)
        throw ArgumentError("invalid UDP port '" + s + "' (must be 1 .. 65535)");
    return static_cast<uint16_t>(v);
}

FlowSpec parseFlowSpec(const std::string& port, const std::string& addr)
{
    FlowSpec f;
    f.port = parsePort(port);
    if (addr.empty())
        return f;
    static const std::array<uint8_t, 16> zero{};
    const bool text = addr.find('\0') == std::string::npos; // inet_pton would stop at a NUL
    if (text && inet_pton(AF_INET, addr.c_str(), f.addr.data()) == 1)
        f.family = NPF_FAMILY_IPV4;
    else if (text && inet_pton(AF_INET6, addr.c_str(), f.addr.data()) == 1)
        f.family = NPF_FAMILY_IPV6;
    else
        throw ArgumentError("invalid address '" + addr + "' (want an IPv4 or IPv6 address)");
    if (f.addr == zero)
        throw ArgumentError("address '" + addr + "' is unspecified: leave out --addr to match any address");
    return f;
}

std::string addrString(const FlowSpec& f)
{
    char buf[INET6_ADDRSTRLEN] = "";
    if (f.family == NPF_FAMILY_IPV4)
        inet_ntop(AF_INET, f.addr.data(), buf, sizeof(buf));
    else if (f.family == NPF_FAMILY_IPV6)
        inet_ntop(AF_INET6, f.addr.data(), buf, sizeof(buf));
    return buf;
}

std::string toString(const FlowSpec& f)
{
    std::string a = addrString(f);
    return (a.empty() ? "" : a + " ") + "port " + std::to_string(f.port);
}

npf_flow_key toKey(const FlowSpec& f)
{
    npf_flow_key k{};
    if (f.family == NPF_FAMILY_IPV4)
        std::memcpy(k.addr, f.addr.data(), 4);
    else if (f.family == NPF_FAMILY_IPV6)
        std::memcpy(k.addr, f.addr.data(), 16);
    k.port = htons(f.port);
    k.family = f.family;
    return k;
}

FlowSpec fromKey(const npf_flow_key& k)
{
    FlowSpec f;
    f.port = ntohs(k.port);
    f.family = k.family;
    std::memcpy(f.addr.data(), k.addr, 16);
    return f;
}

namespace {

std::vector<std::pair<npf_flow_key, npf_flow>> entries(const Dataplane& dp)
{
    std::vector<std::pair<npf_flow_key, npf_flow>> out;
    npf_flow_key key{}, next{};
    const void* prev = nullptr;
    while (bpf_map_get_next_key(dp.flows(), prev, &next) == 0) {
        npf_flow v{};
        if (bpf_map_lookup_elem(dp.flows(), &next, &v) == 0)
            out.emplace_back(next, v);
        key = next;
        prev = &key;
    }
    if (errno != ENOENT)
        throwErrno("iterate npf_flows of " + dp.ifname());
    return out;
}

} // namespace

FlowLock::FlowLock(const Dataplane& dp) : fd_(::open(dp.pinDir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC))
{
    if (!fd_)
        throwErrno("open " + dp.pinDir() + " to lock the flow table");
    while (::flock(fd_.get(), LOCK_EX) != 0)
        if (errno != EINTR)
            throwErrno("lock the flow table of " + dp.ifname() + " (flock " + dp.pinDir() + ")");
}

namespace {

std::optional<FlowEntry> lookup(const Dataplane& dp, const npf_flow_key& key, const std::string& what)
{
    npf_flow v{};
    if (bpf_map_lookup_elem(dp.flows(), &key, &v) == 0)
        return FlowEntry{v.id, v.gen};
    if (errno != ENOENT)
        throwErrno(what);
    return std::nullopt;
}

// Waits for an RCU grace period: every XDP run that started before has
// finished (XDP runs in softirq context, an RCU read-side section).
void waitForXdpRuns() noexcept
{
    (void)::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

void clearRegion(const Dataplane& dp, uint32_t id, const std::string& what)
{
    for (uint32_t c = 0; c < NPF_BITMAP_CLASSES; c++)
        if (bpf_map_delete_elem(dp.regions(c), &id) != 0 && errno != ENOENT)
            throwErrno(what + ": unbind the region of flow id " + std::to_string(id));
}

// The caller holds the FlowLock.
EngineFlow addLocked(const Dataplane& dp, const FlowSpec& f, uint32_t cursorFlags)
{
    std::string what = "add flow " + toString(f) + " on " + dp.ifname();
    npf_flow_key key = toKey(f);
    if (std::optional<FlowEntry> e = lookup(dp, key, what))
        throw StateError(EEXIST, what + ": flow exists already (id " + std::to_string(e->id) + ")");
    bool used[NPF_MAX_FLOWS] = {};
    for (const auto& [k, v] : entries(dp))
        if (v.id < NPF_MAX_FLOWS)
            used[v.id] = true;
    uint32_t id = 0;
    while (id < NPF_MAX_FLOWS && used[id])
        ++id;
    if (id == NPF_MAX_FLOWS)
        throw StateError(ENOSPC, what + ": no free flow id (all " + std::to_string(NPF_MAX_FLOWS) +
                                     " in use; npfctl flow del one)");

    // A fresh flow starts at seq 0 under a new generation, in a ring map of
    // its own, with no region bound, before XDP can find the key. Packets
    // still carrying the previous generation are refused by XDP and by the
    // engine. (npf_flow_stats[id] keeps the generation count.) The ring is
    // pinned as it is installed, so its pin is always the map in the slot
    // (FlowRing::open).
    const uint32_t last = flowGeneration(dp, id);
    const uint32_t gen = last + 1 ? last + 1 : 1;
    FlowRing ring = FlowRing::create(gen, cursorFlags);
    clearRegion(dp, id, what);
    resetFlowXdpStats(dp, id, gen);
    const int ringFd = ring.fd();
    checkErrno(bpf_map_update_elem(dp.rings(), &id, &ringFd, BPF_ANY),
               what + ": install the post ring of flow id " + std::to_string(id));
    ring.pin(ringPinPath(dp.pinDir(), id));
    npf_flow val{id, gen, 0};
    if (bpf_map_update_elem(dp.flows(), &key, &val, BPF_NOEXIST) != 0) {
        if (errno == EEXIST)
            throw StateError(EEXIST, what + ": flow exists already");
        if (errno == E2BIG)
            throw StateError(ENOSPC, what + ": flow table full");
        throwErrno(what);
    }
    return {FlowEntry{id, gen}, FlowOrigin::Added, std::move(ring)};
}

} // namespace

FlowEntry addFlow(const Dataplane& dp, const FlowSpec& f)
{
    FlowLock lock(dp);
    return addLocked(dp, f, 0).entry;
}

// An operator's flow (npfctl flow add) on f's port that f would overlap: a
// wildcard under which f names an address (XDP looks the exact address up
// first: f would take the datagrams to it), or an address under f as a
// wildcard. The caller holds the flow lock.
std::optional<FlowSpec> operatorsOverlapping(const Dataplane& dp, const FlowSpec& f)
{
    for (const auto& [k, v] : entries(dp)) {
        const FlowSpec other = fromKey(k);
        if (other.port != f.port || other == f || (other.family == NPF_FAMILY_ANY) == (f.family == NPF_FAMILY_ANY))
            continue;
        std::optional<FlowRing> ring = v.id < NPF_MAX_FLOWS ? FlowRing::open(dp, v.id) : std::nullopt;
        if (ring && !(ring->cursor()->flags & NPF_CURSOR_F_ENGINE))
            return other;
    }
    return std::nullopt;
}

EngineFlow openEngineFlow(const Dataplane& dp, const FlowSpec& f, const RegionBinding& region, bool fresh)
{
    FlowLock lock(dp);
    std::string what = "open flow " + toString(f) + " on " + dp.ifname();
    const npf_flow_key key = toKey(f);
    if (fresh)
        if (std::optional<FlowSpec> op = operatorsOverlapping(dp, f))
            throw StateError(EBUSY, what + ": it overlaps the operator's flow " + toString(*op) +
                                        " (npfctl flow add), whose datagrams are never handed to a client");
    std::optional<EngineFlow> out;
    if (std::optional<FlowEntry> e = lookup(dp, key, what)) {
        std::optional<FlowRing> ring = FlowRing::open(dp, e->id);
        const bool operators = ring && !(ring->cursor()->flags & NPF_CURSOR_F_ENGINE);
        if (fresh && operators)
            throw StateError(EBUSY, what + ": it is an operator's flow (npfctl flow add, id " + std::to_string(e->id) +
                                        "), never handed to a client; npfctl flow del it to let clients open it");
        if (fresh || !ring) {
            if (bpf_map_delete_elem(dp.flows(), &key) != 0)
                throwErrno(what + ": replace the old entry");
            waitForXdpRuns();
        } else {
            FlowOrigin origin =
                (ring->cursor()->flags & NPF_CURSOR_F_ENGINE) ? FlowOrigin::FromEngine : FlowOrigin::FromOperator;
            out.emplace(EngineFlow{*e, origin, std::move(*ring)});
        }
    }
    if (!out)
        out.emplace(addLocked(dp, f, NPF_CURSOR_F_ENGINE));
    // The bitmap first: XDP uses a flow's region once region_size is set.
    const uint32_t id = out->entry.id;
    // In its size class's outer array (the class follows from the size, in
    // XDP too); any other class's slot of the id is cleared.
    const uint32_t cls = bitmapClass((region.size + NPF_PAGE_SIZE - 1) / NPF_PAGE_SIZE);
    for (uint32_t c = 0; c < NPF_BITMAP_CLASSES; c++)
        if (c != cls && bpf_map_delete_elem(dp.regions(c), &id) != 0 && errno != ENOENT)
            throwErrno(what + ": clear its region binding");
    checkErrno(bpf_map_update_elem(dp.regions(cls), &id, &region.bitmapFd, BPF_ANY),
               what + ": bind its region's resident bitmap");
    npf_flow val{id, out->entry.gen, region.size};
    checkErrno(bpf_map_update_elem(dp.flows(), &key, &val, BPF_EXIST), what + ": bind its region");
    out->xdpAtOpen = readFlowXdpStats(dp, id, out->entry.gen);
    return std::move(*out);
}

void unbindRegion(const Dataplane& dp, const FlowSpec& f, FlowEntry expect)
{
    std::string what = "unbind the region of flow " + toString(f) + " on " + dp.ifname();
    const npf_flow_key key = toKey(f);
    FlowLock lock(dp);
    std::optional<FlowEntry> e = lookup(dp, key, what);
    if (!e || *e != expect)
        return;
    npf_flow val{e->id, e->gen, 0};
    checkErrno(bpf_map_update_elem(dp.flows(), &key, &val, BPF_EXIST), what);
    clearRegion(dp, e->id, what);
}

void delFlow(const Dataplane& dp, const FlowSpec& f, std::optional<FlowEntry> expect)
{
    std::string what = "delete flow " + toString(f) + " on " + dp.ifname();
    npf_flow_key key = toKey(f);
    FlowLock lock(dp);
    std::optional<FlowEntry> e = lookup(dp, key, what);
    if (!e)
        throw StateError(ENOENT, what + ": no such flow");
    if (expect && *e != *expect)
        throw StateError(ESTALE, what + ": it is not the flow this process added (id " + std::to_string(e->id) +
                                     " generation " + std::to_string(e->gen) + "): left in place");
    if (bpf_map_delete_elem(dp.flows(), &key) != 0)
        throwErrno(what);
    clearRegion(dp, e->id, what);
    waitForXdpRuns();
}

std::vector<FlowInfo> listFlows(const Dataplane& dp)
{
    std::vector<FlowInfo> out;
    for (const auto& [k, v] : entries(dp)) {
        FlowInfo fi;
        fi.id = v.id;
        fi.gen = v.gen;
        fi.spec = fromKey(k);
        if (v.id < NPF_MAX_FLOWS) {
            if (std::optional<FlowRing> r = FlowRing::open(dp, v.id)) {
                const dataplane::PostReader ring(r->posts(), r->cursor());
                fi.prod = ring.published();
                fi.cons = ring.consumed();
            }
            fi.xdp = readFlowXdpStats(dp, v.id, v.gen);
        }
        out.push_back(fi);
    }
    std::sort(out.begin(), out.end(), [](const FlowInfo& a, const FlowInfo& b) { return a.id < b.id; });
    return out;
}

} // namespace npf::dataplane
