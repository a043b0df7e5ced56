#include "dataplane/attach.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <xdp/libxdp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "dataplane/bpf_info.h"
#include "dataplane/dataplane.h"
#include "dataplane/iface.h"
#include "dataplane/lib_log.h"
#include "dataplane/pins.h"
#include "dataplane/privileges.h"
#include "dataplane/skeleton.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf::dataplane {
namespace {

struct CloseProgram {
    void operator()(xdp_program* p) const noexcept { xdp_program__close(p); }
};

std::string describe(const XdpProgram& p)
{
    return "'" + p.shownName() + "' (id " + std::to_string(p.id) + ", " + toString(p.slot) + ")";
}

// Removes the pin directory unless released: a failed attach leaves no pins.
class PinGuard {
public:
    explicit PinGuard(std::string ifname) : ifname_(std::move(ifname)) {}
    ~PinGuard()
    {
        if (armed_) {
            try {
                removePinDir(ifname_);
            } catch (const std::exception& e) {
                NPF_WARN("%s", e.what());
            }
        }
    }
    PinGuard(const PinGuard&) = delete;
    PinGuard& operator=(const PinGuard&) = delete;
    void release() { armed_ = false; }

private:
    std::string ifname_;
    bool armed_ = true;
};

void validate(const AttachOptions& o)
{
    validateIfname(o.ifname);
    if (o.queues > NPF_MAX_QUEUES)
        throw ArgumentError("--queues " + std::to_string(o.queues) + ": at most " +
                            std::to_string(NPF_MAX_QUEUES));
}

// Set pin paths before load: libbpf then pins the maps (and would reuse
// compatible pinned maps of the same names).
void setPinPaths(Skeleton& sk, const std::string& ifname)
{
    bpf_map* maps[] = {sk->maps.npf_flows,     sk->maps.npf_rings,     sk->maps.npf_regions_0,
                       sk->maps.npf_regions_1, sk->maps.npf_regions_2, sk->maps.npf_regions_3,
                       sk->maps.npf_regions_4, sk->maps.npf_xsks,      sk->maps.npf_stats,
                       sk->maps.npf_flow_stats};
    static_assert(std::size(maps) == kPinnedMaps.size());
    for (size_t i = 0; i < std::size(maps); ++i) {
        if (std::strcmp(bpf_map__name(maps[i]), kPinnedMaps[i]) != 0)
            throwErrno(EINVAL, std::string("npf_xdp map ") + bpf_map__name(maps[i]) +
                                   " does not match pin name " + kPinnedMaps[i] + " (stale build?)");
        checkNeg(bpf_map__set_pin_path(maps[i], pinPath(ifname, kPinnedMaps[i]).c_str()),
                 std::string("set pin path of ") + kPinnedMaps[i]);
    }
}

// "attach npf_xdp to lo (native): <strerror> — <what to do>", decided from
// the error and the interface's state, never from what libbpf or libxdp
// logged (-v shows that, the kernel's own reason included).
std::string attachError(const AttachOptions& o, const Interface& itf, int err)
{
    std::string what = std::string("attach ") + NPF_PROG_NAME + " to " + o.ifname + " (" + toString(o.mode) +
                       "): " + std::strerror(err);
    const char* other = toString(otherMode(o.mode));
    if (err == EPERM || err == EACCES)
        return what + " — needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (run as root)";
    if (err == EEXIST || err == EBUSY) {
        what += " — another XDP program appeared meanwhile";
        try {
            if (std::vector<XdpProgram> now = queryXdp(itf.ifindex, 0).programs; !now.empty())
                what += ": " + describe(now.front());
        } catch (const std::system_error&) { // which one is a detail
        }
        return what;
    }
    // Drivers without multi-buffer XDP refuse native mode above an MTU of
    // their own (about a page per packet), with EINVAL, ERANGE (veth) or
    // EOPNOTSUPP, the errno of a driver without native XDP too.
    uint32_t mtu = 0;
    if (o.mode == AttachMode::Native && (err == EINVAL || err == ERANGE || err == EOPNOTSUPP)) {
        try {
            mtu = linkMtu(itf.name);
        } catch (const std::system_error&) { // unknown: no MTU hint
        }
    }
    const bool jumbo = mtu > ETH_DATA_LEN;
    if (err == EOPNOTSUPP)
        return what + " — mode not supported, try --mode " + other +
               (jumbo ? " (or an MTU below " + std::to_string(mtu) + ": the driver may not run multi-buffer XDP)"
                      : "");
    if (jumbo)
        return what + " — the driver may not run a multi-buffer (frags) XDP program at MTU " + std::to_string(mtu) +
               ": lower the MTU or try --mode " + other;
    return what + " (-v shows what libbpf and libxdp said)";
}

// Refuses (npf attached, a foreign program without `force`), then removes
// stale pins and (with `force`) the foreign programs. Pins whose program is
// not the one attached here are stale: this namespace's pin directory is
// this interface's, and its pinned program runs nowhere else.
void prepare(const AttachOptions& opt, const Interface& itf, AttachResult* res)
{
    uint32_t pinnedId = 0;
    (void)openPinnedProgram(itf.name, &pinnedId);
    XdpState st = queryXdp(itf.ifindex, pinnedId);
    if (const XdpProgram* p = st.npf())
        throw StateError(EBUSY, "npf is already attached to " + itf.name + " (prog id " + std::to_string(p->id) +
                                    ", " + toString(p->slot) + "): detach first (npfctl detach " + itf.name + ")");
    std::vector<XdpProgram> foreign = st.foreign();
    if (!foreign.empty() && !opt.force)
        throw StateError(EEXIST, itf.name + " already has a foreign XDP program " + describe(foreign.front()) +
                                     ": use --force to replace it");
    if (pinDirExists(itf.name)) {
        removePinDir(itf.name);
        res->removedStalePins = true;
        NPF_INFO("removed stale pins of an earlier npf instance at %s", pinDir(itf.name).c_str());
    }
    for (const XdpProgram& p : foreign) {
        detachProgram(itf.ifindex, itf.name, p);
        NPF_INFO("removed foreign XDP program %s from %s (--force)", describe(p).c_str(), itf.name.c_str());
        res->replaced.push_back(p);
    }
}

// Pins the attached program beside its maps.
void pinProgram(int fd, const std::string& ifname)
{
    const std::string path = pinPath(ifname, kProgPin);
    checkNeg(bpf_obj_pin(fd, path.c_str()), "pin " + std::string(NPF_PROG_NAME) + " at " + path);
}

// Without CAP_SYS_ADMIN: loads npf_xdp and attaches it directly (netlink).
// libxdp's dispatcher is not for such a process: libxdp opens the
// dispatcher's programs by id to add or remove one. (On kernels that refuse
// freplace programs, this one, libxdp attaches directly too.) Returns its id.
uint32_t attachDirectly(const AttachOptions& opt, const Interface& itf, Skeleton& sk)
{
    sk.load();
    const int fd = bpf_program__fd(sk->progs.npf_xdp);
    pinProgram(fd, itf.name);
    const uint32_t mode = opt.mode == AttachMode::Native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
    if (int err = bpf_xdp_attach(itf.ifindex, fd, XDP_FLAGS_UPDATE_IF_NOEXIST | mode, nullptr)) {
        err = -err;
        if (err == EEXIST || err == EBUSY)
            throw StateError(err, attachError(opt, itf, err));
        throw Error(err, attachError(opt, itf, err));
    }
    NPF_INFO("%s attached directly to %s, not through libxdp's dispatcher: managing that needs CAP_SYS_ADMIN",
             NPF_PROG_NAME, itf.name.c_str());
    return progInfo(fd, NPF_PROG_NAME).id;
}

// Through libxdp, which uses its multi-program dispatcher where the kernel
// allows it; the program is pinned once attached (a dispatcher's component
// is loaded by the attach). Returns its id.
uint32_t attachThroughLibxdp(const AttachOptions& opt, const Interface& itf, Skeleton& sk)
{
    // libbpf and libxdp log at npfctl's debug level (-v) while they work:
    // libxdp probing its dispatcher on a kernel that refuses it is expected.
    LibLogCapture cap;
    std::unique_ptr<xdp_program, CloseProgram> prog(xdp_program__from_bpf_obj(sk->obj, nullptr));
    if (long err = libxdp_get_error(prog.get())) {
        prog.release();
        cap.replayWarnings();
        throwErrno(static_cast<int>(-err), std::string("open ") + NPF_PROG_NAME + " through libxdp");
    }
    xdp_attach_mode mode = opt.mode == AttachMode::Native ? XDP_MODE_NATIVE : XDP_MODE_SKB;
    if (int err = xdp_program__attach(prog.get(), itf.ifindex, mode, 0)) {
        err = -err;
        if (err == EEXIST || err == EBUSY)
            throw StateError(err, attachError(opt, itf, err));
        throw Error(err, attachError(opt, itf, err));
    }
    try {
        pinProgram(xdp_program__fd(prog.get()), itf.name);
    } catch (...) {
        (void)xdp_program__detach(prog.get(), itf.ifindex, mode, 0);
        throw;
    }
    return xdp_program__id(prog.get());
}

} // namespace

AttachResult attach(const AttachOptions& opt)
{
    validate(opt);
    requireBpfPrivileges("attach");
    Interface itf = resolveInterface(opt.ifname);
    ensureBpffs();

    AttachResult res;
    res.ifname = itf.name;
    res.ifindex = itf.ifindex;
    res.mode = opt.mode;
    prepare(opt, itf, &res);

    LoadConfig cfg;
    cfg.queues = opt.queues ? opt.queues : std::min<uint32_t>(rxQueueCount(itf.name), NPF_MAX_QUEUES);
    Skeleton sk = Skeleton::open(cfg);
    res.queues = sk.config().queues;
    res.pinDir = pinDir(itf.name);

    makePinDir(itf.name);
    PinGuard pins(itf.name);
    setPinPaths(sk, itf.name);
    res.progId = canOpenBpfById() ? attachThroughLibxdp(opt, itf, sk) : attachDirectly(opt, itf, sk);

    // Whether libxdp used its dispatcher, from what the kernel now runs on
    // the interface. Not xdp_multiprog__get_from_ifindex: libxdp 1.3 never
    // closes the program fd it opens there (xdp_multiprog__from_id), and a
    // long-lived engine would then hold npf_xdp (and its maps) alive after
    // its interface is gone.
    const XdpState after = queryXdp(itf.ifindex, res.progId);
    const XdpProgram* attached = after.npf();
    res.dispatcher = attached && attached->viaDispatcher;
    if (!res.dispatcher && canOpenBpfById())
        NPF_INFO("libxdp multi-program dispatcher unavailable on this kernel: %s runs as the only XDP program "
                 "on %s (-v shows libxdp's reason)",
                 NPF_PROG_NAME, itf.name.c_str());
    pins.release();
    return res;
}

DetachResult detach(const std::string& ifname, bool force)
{
    validateIfname(ifname);
    requireBpfPrivileges("detach");
    DetachResult res;
    Interface itf;
    try {
        itf = resolveInterface(ifname);
    } catch (const std::system_error& e) {
        if (e.code().value() != ENODEV || !pinDirExists(ifname))
            throw;
        if (!force)
            throw Error(ENODEV, std::string(e.what()) + "; its pins at " + pinDir(ifname) +
                                   " are left alone (npfctl detach --force " + ifname +
                                   " removes them if the interface is gone)");
        res.removedPins = removePinDir(ifname);
        return res;
    }

    uint32_t pinnedId = 0;
    const Fd pinned = openPinnedProgram(ifname, &pinnedId);
    XdpState st = queryXdp(itf.ifindex, pinnedId);
    if (const XdpProgram* p = st.npf()) {
        detachProgram(itf.ifindex, itf.name, *p, p->id == pinnedId ? pinned.get() : -1);
        res.detached = true;
        res.progId = p->id;
    }
    for (const XdpProgram& p : st.foreign()) {
        if (force) {
            detachProgram(itf.ifindex, itf.name, p);
            res.foreignRemoved.push_back(p);
        } else {
            res.foreignLeft.push_back(p);
        }
    }
    // What is left is stale: the program pinned here is attached nowhere else.
    res.removedPins = removePinDir(itf.name);
    return res;
}

} // namespace npf::dataplane
