#include "ctl/attach.h"

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "ctl/dataplane.h"
#include "ctl/errors.h"
#include "ctl/iface.h"
#include "ctl/lib_log.h"
#include "ctl/pins.h"
#include "ctl/privileges.h"
#include "ctl/skeleton.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf::ctl {
namespace {

struct CloseProgram {
    void operator()(xdp_program* p) const noexcept { xdp_program__close(p); }
};

std::string describe(const XdpProgram& p)
{
    return "'" + p.name + "' (id " + std::to_string(p.id) + ", " + toString(p.slot) + ")";
}

constexpr const char* kKernelMessage = "Kernel error message: ";
// libxdp logs this when it gives up on its dispatcher; what follows is about our program.
constexpr const char* kFallback = "Falling back to loading single prog without dispatcher";

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
    if (o.regionPages == 0 || o.regionPages > NPF_MAX_REGION_PAGES)
        throw ArgumentError("--region-pages " + std::to_string(o.regionPages) + ": must be 1 .. " +
                            std::to_string(NPF_MAX_REGION_PAGES));
}

// Set pin paths before load: libbpf then pins the maps (and would reuse
// compatible pinned maps of the same names).
void setPinPaths(Skeleton& sk, const std::string& ifname)
{
    bpf_map* maps[] = {sk->maps.npf_flows,    sk->maps.npf_posts, sk->maps.npf_cursors,
                       sk->maps.npf_resident, sk->maps.npf_xsks,  sk->maps.npf_stats};
    static_assert(std::size(maps) == kPinnedMaps.size());
    for (size_t i = 0; i < std::size(maps); ++i) {
        if (std::strcmp(bpf_map__name(maps[i]), kPinnedMaps[i]) != 0)
            throwErrno(EINVAL, std::string("npf_xdp map ") + bpf_map__name(maps[i]) +
                                   " does not match pin name " + kPinnedMaps[i] + " (stale build?)");
        checkNeg(bpf_map__set_pin_path(maps[i], pinPath(ifname, kPinnedMaps[i]).c_str()),
                 std::string("set pin path of ") + kPinnedMaps[i]);
    }
}

// "attach npf_xdp to lo (native): <kernel's reason>: <strerror> — <what to do>"
std::string attachError(const AttachOptions& o, int err, const LibLogCapture& cap)
{
    std::string what = std::string("attach ") + NPF_PROG_NAME + " to " + o.ifname + " (" + toString(o.mode) + ")";
    std::string kernel = cap.after(kKernelMessage);
    if (!kernel.empty())
        what += ": " + kernel;
    what += std::string(": ") + std::strerror(err);
    if (kernel.find("MTU") != std::string::npos)
        what += std::string(" — the driver cannot run a multi-buffer (frags) XDP program at this MTU: lower the "
                            "MTU or try --mode ") +
                toString(otherMode(o.mode));
    else if (err == EOPNOTSUPP)
        what += std::string(" — mode not supported, try --mode ") + toString(otherMode(o.mode));
    else if (err == EPERM || err == EACCES)
        what += " — run as root";
    return what;
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

    XdpState st = queryXdp(itf.ifindex);
    if (const XdpProgram* p = st.npf())
        throw StateError(EBUSY, "npf is already attached to " + itf.name + " (prog id " + std::to_string(p->id) +
                                    ", " + toString(p->slot) + "): detach first (npfctl detach " + itf.name + ")");
    std::vector<XdpProgram> foreign = st.foreign();
    if (!foreign.empty() && !opt.force)
        throw StateError(EEXIST, itf.name + " already has a foreign XDP program " + describe(foreign.front()) +
                                     ": use --force to replace it");

    if (pinDirExists(itf.name)) {
        if (std::optional<uint32_t> owner = pinsOwner(itf.name))
            throw StateError(EBUSY, "pins at " + pinDir(itf.name) + " are in use by " + NPF_PROG_NAME + " prog id " +
                                        std::to_string(*owner) +
                                        " (npf on a same-named interface in another network namespace?)");
        removePinDir(itf.name);
        res.removedStalePins = true;
        NPF_INFO("removed stale pins of an earlier npf instance at %s", pinDir(itf.name).c_str());
    }

    for (const XdpProgram& p : foreign) {
        detachProgram(itf.ifindex, itf.name, p);
        NPF_INFO("removed foreign XDP program %s from %s (--force)", describe(p).c_str(), itf.name.c_str());
        res.replaced.push_back(p);
    }

    LoadConfig cfg;
    cfg.regionPages = opt.regionPages;
    cfg.queues = opt.queues ? opt.queues : std::min<uint32_t>(rxQueueCount(itf.name), NPF_MAX_QUEUES);
    Skeleton sk = Skeleton::open(cfg);
    res.queues = sk.config().queues;
    res.regionPages = sk.config().regionPages;
    res.pinDir = pinDir(itf.name);

    makePinDir(itf.name);
    PinGuard pins(itf.name);
    setPinPaths(sk, itf.name);

    LibLogCapture cap;
    std::unique_ptr<xdp_program, CloseProgram> prog(xdp_program__from_bpf_obj(sk->obj, nullptr));
    if (long err = libxdp_get_error(prog.get())) {
        prog.release();
        cap.replayWarnings();
        throwErrno(static_cast<int>(-err), std::string("open ") + NPF_PROG_NAME + " through libxdp");
    }
    xdp_attach_mode mode = opt.mode == AttachMode::Native ? XDP_MODE_NATIVE : XDP_MODE_SKB;
    if (int err = xdp_program__attach(prog.get(), itf.ifindex, mode, 0)) {
        cap.replayWarnings(kFallback, kKernelMessage);
        err = -err;
        std::string what = attachError(opt, err, cap);
        if (err == EEXIST || err == EBUSY)
            throw StateError(err, what + " — another XDP program appeared meanwhile");
        throw Error(err, what);
    }
    res.progId = xdp_program__id(prog.get());

    // Not xdp_multiprog__get_from_ifindex: for a legacy (single) program
    // libxdp 1.3 keeps a program fd open after xdp_multiprog__close, and a
    // long-lived engine would then hold npf_xdp (and its maps) alive after
    // its interface is gone.
    const XdpState after = queryXdp(itf.ifindex);
    const XdpProgram* attached = after.npf();
    res.dispatcher = attached && attached->viaDispatcher;
    if (!res.dispatcher) {
        res.dispatcherUnavailable = cap.after("Compatibility check for dispatcher program failed: ");
        NPF_INFO("libxdp multi-program dispatcher unavailable on this kernel%s: %s runs as the only XDP "
                 "program on %s",
                 res.dispatcherUnavailable.empty() ? "" : (" (" + res.dispatcherUnavailable + ")").c_str(),
                 NPF_PROG_NAME, itf.name.c_str());
    }
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
        if (std::optional<uint32_t> owner = pinsOwner(ifname))
            throw StateError(EBUSY, "pins at " + pinDir(ifname) + " are in use by " + NPF_PROG_NAME +
                                        " prog id " + std::to_string(*owner) + " on another interface");
        res.removedPins = removePinDir(ifname);
        return res;
    }

    XdpState st = queryXdp(itf.ifindex);
    std::optional<uint32_t> owner = pinDirExists(ifname) ? pinsOwner(ifname) : std::nullopt;
    if (const XdpProgram* p = st.npf()) {
        detachProgram(itf.ifindex, itf.name, *p);
        res.detached = true;
        res.progId = p->id;
        if (owner && *owner == p->id)
            owner.reset();
    }
    for (const XdpProgram& p : st.foreign()) {
        if (force) {
            detachProgram(itf.ifindex, itf.name, p);
            res.foreignRemoved.push_back(p);
        } else {
            res.foreignLeft.push_back(p);
        }
    }
    if (owner && !force)
        res.pinsInUseElsewhere = true;
    else
        res.removedPins = removePinDir(itf.name);
    return res;
}

} // namespace npf::ctl
