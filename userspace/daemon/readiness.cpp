#include "daemon/readiness.h"

#include <net/if.h>

#include <optional>

#include "daemon/daemon.h"
#include "dataplane/xdp_state.h"
#include "engine/service.h"
#include "sys/netns.h"

namespace npf::daemon {
namespace {

// "" while npfd's program is the one attached to the interface (which the
// pager has not seen go yet: this may be first).
std::string xdpProblem(const Iface& s)
{
    std::optional<NetnsScope> in;
    if (s.netnsFd)
        in.emplace(s.netnsFd.get(), "of " + s.label);
    char name[IF_NAMESIZE];
    if (!::if_indextoname(static_cast<unsigned>(s.ifindex()), name))
        return "is gone (no interface with ifindex " + std::to_string(s.ifindex()) +
               " any more: deleted, or moved out of its network namespace)";
    // Known by id: npfd holds no CAP_SYS_ADMIN to read another program's name.
    const dataplane::XdpState st = dataplane::queryXdp(s.ifindex(), s.progId());
    const std::string ours = std::to_string(s.progId());
    if (const dataplane::XdpProgram* prog = st.npf(); prog && prog->id == s.progId())
        return "";
    if (!st.programs.empty())
        return "npfd's npf_xdp (prog id " + ours + ") was replaced by " + st.programs.front().shownName() +
               " (prog id " + std::to_string(st.programs.front().id) + "): npfd's sockets are not in its maps";
    return "npf_xdp (prog id " + ours + ") is no longer attached: its datagrams pass to the kernel";
}

} // namespace

std::vector<std::string> notServed(const std::vector<Iface>& ifaces, const ipc::Listener& listener)
{
    std::vector<std::string> out;
    for (const Iface& s : ifaces) {
        if (std::string gone = s.service ? s.service->failure() : ""; !gone.empty()) { // npfd stops serving: it exits
            out.push_back(s.label + ": " + gone);
            continue;
        }
        std::string why;
        try {
            why = xdpProblem(s);
        } catch (const std::exception& e) {
            why = std::string("cannot tell whether npf_xdp is attached: ") + e.what();
        }
        if (!why.empty())
            out.push_back(s.label + ": " + why + " (restart npfd to serve it again)");
    }
    if (std::string why = listener.lost(); !why.empty())
        out.push_back(why + " (restart npfd)");
    return out;
}

} // namespace npf::daemon
