#include "dataplane/xdp_state.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <xdp/libxdp.h>

#include <memory>

#include "dataplane/bpf_info.h"
#include "dataplane/lib_log.h"
#include "npf/abi.h"
#include "sys/error.h"
#include "sys/fd.h"

namespace npf::dataplane {
namespace {

constexpr const char* kDispatcherName = "xdp_dispatcher";

struct CloseMultiprog {
    void operator()(xdp_multiprog* mp) const noexcept { xdp_multiprog__close(mp); }
};
struct CloseProgram {
    void operator()(xdp_program* p) const noexcept { xdp_program__close(p); }
};

xdp_attach_mode libxdpMode(XdpSlot s)
{
    switch (s) {
    case XdpSlot::Native: return XDP_MODE_NATIVE;
    case XdpSlot::Skb: return XDP_MODE_SKB;
    case XdpSlot::Hw: return XDP_MODE_HW;
    }
    return XDP_MODE_UNSPEC;
}

// Components of the libxdp dispatcher attached to ifindex.
void addDispatcherComponents(int ifindex, XdpSlot slot, XdpState* st)
{
    LibLogCapture quiet;
    std::unique_ptr<xdp_multiprog, CloseMultiprog> mp(xdp_multiprog__get_from_ifindex(ifindex));
    if (libxdp_get_error(mp.get())) {
        mp.release();
        return;
    }
    for (xdp_program* p = xdp_multiprog__next_prog(nullptr, mp.get()); p;
         p = xdp_multiprog__next_prog(p, mp.get()))
        st->programs.push_back({xdp_program__id(p), xdp_program__name(p), slot, true});
}

// Why opening a program by id failed, when it is a missing privilege.
std::string byIdHint(int err)
{
    return err == EPERM || err == EACCES ? " (opening a program by id needs CAP_SYS_ADMIN)" : "";
}

} // namespace

const char* toString(XdpSlot s)
{
    switch (s) {
    case XdpSlot::Native: return "native";
    case XdpSlot::Skb: return "skb";
    case XdpSlot::Hw: return "hw";
    }
    return "?";
}

uint32_t slotFlag(XdpSlot s)
{
    switch (s) {
    case XdpSlot::Native: return XDP_FLAGS_DRV_MODE;
    case XdpSlot::Skb: return XDP_FLAGS_SKB_MODE;
    case XdpSlot::Hw: return XDP_FLAGS_HW_MODE;
    }
    return 0;
}

bool XdpProgram::isNpf() const { return name == NPF_PROG_NAME; }

std::string XdpProgram::shownName() const
{
    return name.empty() ? "(name unknown: reading it needs CAP_SYS_ADMIN)" : name;
}

const XdpProgram* XdpState::npf() const
{
    for (const XdpProgram& p : programs)
        if (p.isNpf())
            return &p;
    return nullptr;
}

std::vector<XdpProgram> XdpState::foreign() const
{
    std::vector<XdpProgram> out;
    for (const XdpProgram& p : programs)
        if (!p.isNpf())
            out.push_back(p);
    return out;
}

XdpState queryXdp(int ifindex, uint32_t npfId)
{
    LIBBPF_OPTS(bpf_xdp_query_opts, q);
    checkNeg(bpf_xdp_query(ifindex, 0, &q), "query XDP programs of ifindex " + std::to_string(ifindex));
    XdpState st;
    const std::pair<uint32_t, XdpSlot> attached[] = {
        {q.drv_prog_id, XdpSlot::Native}, {q.skb_prog_id, XdpSlot::Skb}, {q.hw_prog_id, XdpSlot::Hw}};
    for (auto [id, slot] : attached) {
        if (id == 0)
            continue;
        if (id == npfId) {
            st.programs.push_back({id, NPF_PROG_NAME, slot, false});
            continue;
        }
        const std::string name = progName(id).value_or("");
        if (name == kDispatcherName)
            addDispatcherComponents(ifindex, slot, &st);
        else
            st.programs.push_back({id, name, slot, false});
    }
    return st;
}

void detachProgram(int ifindex, const std::string& ifname, const XdpProgram& prog, int progFd)
{
    std::string what = "detach XDP program " + prog.shownName() + " (id " + std::to_string(prog.id) + ") from " +
                       ifname + " (" + toString(prog.slot) + ")";
    if (prog.viaDispatcher) {
        LibLogCapture quiet;
        std::unique_ptr<xdp_program, CloseProgram> p(xdp_program__from_id(prog.id));
        if (long err = libxdp_get_error(p.get())) {
            p.release();
            throwErrno(static_cast<int>(-err), what + byIdHint(static_cast<int>(-err)));
        }
        int err = xdp_program__detach(p.get(), ifindex, libxdpMode(prog.slot), 0);
        if (err) {
            quiet.replayWarnings();
            throwErrno(-err, what);
        }
        return;
    }
    Fd byId;
    if (progFd < 0) {
        byId.reset(bpf_prog_get_fd_by_id(prog.id));
        if (!byId) {
            if (errno == ENOENT)
                return; // gone already
            throwErrno(what + byIdHint(errno));
        }
        progFd = byId.get();
    }
    LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = progFd);
    checkNeg(bpf_xdp_detach(ifindex, slotFlag(prog.slot) | XDP_FLAGS_REPLACE, &opts), what);
}

} // namespace npf::dataplane
