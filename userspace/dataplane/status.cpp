#include "dataplane/status.h"

#include <set>

#include "dataplane/dataplane.h"
#include "dataplane/flows.h"
#include "dataplane/iface.h"
#include "dataplane/pins.h"
#include "dataplane/privileges.h"
#include "npf/abi.h"
#include "sys/log.h"

namespace npf::dataplane {
namespace {

void addProblem(InstanceStatus* s, const std::string& p)
{
    s->problem += (s->problem.empty() ? "" : "; ") + p;
}

InstanceStatus build(const Interface& itf, const std::vector<XdpSocket>* socks)
{
    InstanceStatus s;
    s.ifname = itf.name;
    s.ifindex = itf.ifindex;
    uint32_t pinnedId = 0;
    (void)openPinnedProgram(itf.name, &pinnedId);
    XdpState st = queryXdp(itf.ifindex, pinnedId);
    s.foreign = st.foreign();
    if (socks) {
        for (const XdpSocket& x : *socks)
            if (x.ifindex == static_cast<uint32_t>(itf.ifindex))
                s.sockets.push_back(x);
    }

    if (const XdpProgram* p = st.npf()) {
        s.state = InstanceState::Attached;
        s.mode = p->slot == XdpSlot::Skb ? AttachMode::Skb : AttachMode::Native;
        s.progId = p->id;
        try {
            Dataplane dp = Dataplane::open(itf.name);
            s.flows = static_cast<uint32_t>(listFlows(dp).size());
            s.queues = dp.queues();
            s.regions = boundRegions(dp);
            s.slots = xskSlots(dp);
            s.boundQueues = slotQueues(s.slots);
            s.chained = chainedProgram(itf.name);
        } catch (const std::exception& e) {
            addProblem(&s, e.what());
        }
    } else if (pinDirExists(itf.name)) {
        s.state = InstanceState::Stale; // its pinned program is not the one attached
    }
    return s;
}

std::vector<XdpSocket> socketsOrError(std::string* err)
{
    try {
        return xdpSockets();
    } catch (const std::exception& e) {
        *err = e.what();
        NPF_DEBUG("%s", err->c_str());
        return {};
    }
}

// Pins whose interface was deleted under them (ip link del, a pod's
// namespace torn down): nothing runs there any more, only the pins are left.
InstanceStatus gone(const std::string& ifname)
{
    InstanceStatus s;
    s.ifname = ifname;
    s.state = InstanceState::Gone;
    addProblem(&s, "the interface is gone; its pins at " + pinDir(ifname) + " remain: npfctl detach --force " +
                       ifname + " removes them");
    return s;
}

} // namespace

const char* toString(InstanceState s)
{
    switch (s) {
    case InstanceState::None: return "none";
    case InstanceState::Attached: return "attached";
    case InstanceState::Stale: return "stale";
    case InstanceState::Gone: return "gone";
    }
    return "?";
}

InstanceStatus instanceStatus(const std::string& ifname)
{
    validateIfname(ifname);
    requireBpfPrivileges("status");
    Interface itf;
    try {
        itf = resolveInterface(ifname);
    } catch (const std::system_error& e) {
        if (e.code().value() == ENODEV && pinDirExists(ifname))
            return gone(ifname);
        throw;
    }
    std::string err;
    std::vector<XdpSocket> socks = socketsOrError(&err);
    return build(itf, err.empty() ? &socks : nullptr);
}

std::vector<InstanceStatus> allInstances()
{
    requireBpfPrivileges("status");
    std::string err;
    std::vector<XdpSocket> socks = socketsOrError(&err);
    std::vector<InstanceStatus> out;
    std::set<std::string> present;
    for (const Interface& itf : listInterfaces()) {
        present.insert(itf.name);
        InstanceStatus s = build(itf, err.empty() ? &socks : nullptr);
        if (s.state != InstanceState::None)
            out.push_back(std::move(s));
    }
    for (const std::string& name : pinnedInterfaces())
        if (!present.count(name))
            out.push_back(gone(name));
    return out;
}

} // namespace npf::dataplane
