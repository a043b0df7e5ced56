#include "ctl/flows.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "ctl/dataplane.h"
#include "ctl/errors.h"
#include "ctl/pins.h"
#include "sys/error.h"

namespace npf::ctl {

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

// The caller holds the FlowLock.
FlowEntry addLocked(const Dataplane& dp, const FlowSpec& f, uint32_t cursorFlags)
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

    // A fresh flow starts at seq 0 under a new generation: reset the cursors
    // before XDP can find the key. Packets still carrying the previous
    // generation are refused by XDP and by the engine.
    npf_cursor cur{};
    checkErrno(bpf_map_lookup_elem(dp.cursors(), &id, &cur), what + ": read cursors of flow id " + std::to_string(id));
    const uint32_t gen = cur.gen + 1 ? cur.gen + 1 : 1;
    cur = npf_cursor{};
    cur.gen = gen;
    cur.flags = cursorFlags;
    checkErrno(bpf_map_update_elem(dp.cursors(), &id, &cur, BPF_ANY),
               what + ": reset cursors of flow id " + std::to_string(id));
    npf_flow val{id, gen};
    if (bpf_map_update_elem(dp.flows(), &key, &val, BPF_NOEXIST) != 0) {
        if (errno == EEXIST)
            throw StateError(EEXIST, what + ": flow exists already");
        if (errno == E2BIG)
            throw StateError(ENOSPC, what + ": flow table full");
        throwErrno(what);
    }
    return {id, gen};
}

// Waits for an RCU grace period: every XDP run that started before has
// finished (XDP runs in softirq context, an RCU read-side section).
void waitForXdpRuns() noexcept
{
    (void)::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

} // namespace

FlowEntry addFlow(const Dataplane& dp, const FlowSpec& f)
{
    FlowLock lock(dp);
    return addLocked(dp, f, 0);
}

FlowEntry openEngineFlow(const Dataplane& dp, const FlowSpec& f, FlowOrigin* origin)
{
    FlowLock lock(dp);
    std::string what = "open flow " + toString(f) + " on " + dp.ifname();
    if (std::optional<FlowEntry> e = lookup(dp, toKey(f), what)) {
        npf_cursor cur{};
        checkErrno(bpf_map_lookup_elem(dp.cursors(), &e->id, &cur), what + ": read its cursors");
        *origin = (cur.flags & NPF_CURSOR_F_ENGINE) ? FlowOrigin::FromEngine : FlowOrigin::FromOperator;
        return *e;
    }
    *origin = FlowOrigin::Added;
    return addLocked(dp, f, NPF_CURSOR_F_ENGINE);
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
        npf_cursor c{};
        if (v.id < NPF_MAX_FLOWS && bpf_map_lookup_elem(dp.cursors(), &v.id, &c) == 0) {
            fi.prod = c.prod;
            fi.cons = c.cons;
        }
        out.push_back(fi);
    }
    std::sort(out.begin(), out.end(), [](const FlowInfo& a, const FlowInfo& b) { return a.id < b.id; });
    return out;
}

} // namespace npf::ctl
