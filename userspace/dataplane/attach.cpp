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
    if (o.thenExisting && !o.thenPin.empty())
        throw ArgumentError("--then and --then-existing: one program can be chained behind " +
                            std::string(NPF_PROG_NAME));
}

XdpSlot slotOf(AttachMode m) { return m == AttachMode::Native ? XdpSlot::Native : XdpSlot::Skb; }

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
    // Pinned so that the chained program stays in it: the kernel empties a
    // program array once no file (fd or pin) refers to it.
    checkNeg(bpf_map__set_pin_path(sk->maps.npf_next, pinPath(ifname, NPF_NEXT_MAP).c_str()),
             "set pin path of " NPF_NEXT_MAP);
}

// "attach npf_xdp to lo (native): <strerror> — <what to do>", decided from
// the error and the interface's state, never from what libbpf or libxdp
// logged (-v shows that, the kernel's own reason included).
std::string attachError(const AttachOptions& o, const Interface& itf, int err, const NextProgram* next = nullptr)
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
    if (next && !next->frags && o.mode == AttachMode::Native && (err == EINVAL || err == ERANGE))
        return what + " — " + NPF_PROG_NAME + " is loaded without frags support to chain " + next->describe() +
               ", which lacks it, and the driver refuses such a program at MTU " +
               (mtu ? std::to_string(mtu) : std::string("?")) +
               ": lower the MTU, chain a frags-aware program (SEC(\"xdp.frags\")), or try --mode skb";
    if (err == EOPNOTSUPP)
        return what + " — mode not supported, try --mode " + other +
               (jumbo ? " (or an MTU below " + std::to_string(mtu) + ": the driver may not run multi-buffer XDP)"
                      : "");
    if (jumbo)
        return what + " — the driver may not run a multi-buffer (frags) XDP program at MTU " + std::to_string(mtu) +
               ": lower the MTU or try --mode " + other;
    return what + " (-v shows what libbpf and libxdp said)";
}

// The program attached in `mode`'s slot, or nullptr.
const XdpProgram* attachedIn(const std::vector<XdpProgram>& foreign, AttachMode mode)
{
    for (const XdpProgram& p : foreign)
        if (p.slot == slotOf(mode))
            return &p;
    return nullptr;
}

// The program to chain behind npf_xdp (--then PATH, --then-existing), if any.
std::optional<NextProgram> nextProgram(const AttachOptions& opt, const Interface& itf,
                                       const std::vector<XdpProgram>& foreign)
{
    if (!opt.thenPin.empty())
        return openNextPin(opt.thenPin);
    if (!opt.thenExisting)
        return std::nullopt;
    const XdpProgram* p = attachedIn(foreign, opt.mode);
    if (!p) {
        std::string what = "--then-existing: " + itf.name + " has no XDP program in " + toString(opt.mode) +
                           " mode to chain behind " + NPF_PROG_NAME;
        if (!foreign.empty())
            what += " (it has " + describe(foreign.front()) + ": attach in that mode, --mode " +
                    toString(foreign.front().slot) + ")";
        throw StateError(ENOENT, what);
    }
    if (p->viaDispatcher)
        throw StateError(EOPNOTSUPP, "--then-existing: " + describe(*p) + " on " + itf.name +
                                         " runs in libxdp's dispatcher: npf cannot take over a dispatcher");
    return openNextAttached(*p, itf.name);
}

// Refuses (npf attached, a foreign program without `force`), then removes
// stale pins and (with `force`) the foreign programs. Pins whose program is
// not the one attached here are stale: this namespace's pin directory is
// this interface's, and its pinned program runs nowhere else. Returns the
// program to chain; *takeOver: it is the one attached in npf's slot, which
// stays until npf_xdp replaces it.
std::optional<NextProgram> prepare(const AttachOptions& opt, const Interface& itf, AttachResult* res, bool* takeOver)
{
    uint32_t pinnedId = 0;
    (void)openPinnedProgram(itf.name, &pinnedId);
    XdpState st = queryXdp(itf.ifindex, pinnedId);
    if (const XdpProgram* p = st.npf())
        throw StateError(EBUSY, "npf is already attached to " + itf.name + " (prog id " + std::to_string(p->id) +
                                    ", " + toString(p->slot) + "): detach first (npfctl detach " + itf.name + ")");
    std::vector<XdpProgram> foreign = st.foreign();
    std::optional<NextProgram> next = nextProgram(opt, itf, foreign);
    const XdpProgram* inSlot = attachedIn(foreign, opt.mode);
    *takeOver = next && inSlot && !inSlot->viaDispatcher && inSlot->id == next->id;
    if (*takeOver)
        foreign.erase(foreign.begin() + (inSlot - foreign.data()));
    if (!foreign.empty() && !opt.force)
        throw StateError(EEXIST, itf.name + " already has a foreign XDP program " + describe(foreign.front()) +
                                     ": use --force to replace it, or --then-existing to keep it running behind " +
                                     NPF_PROG_NAME);
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
    return next;
}

// Pins the attached program beside its maps.
void pinProgram(int fd, const std::string& ifname)
{
    const std::string path = pinPath(ifname, kProgPin);
    checkNeg(bpf_obj_pin(fd, path.c_str()), "pin " + std::string(NPF_PROG_NAME) + " at " + path);
}

// Attaches the loaded npf_xdp directly (netlink): without CAP_SYS_ADMIN,
// for libxdp's dispatcher is not for such a process (libxdp opens the
// dispatcher's programs by id to add or remove one), and to chain a program.
// (On kernels that refuse freplace programs, this one, libxdp attaches
// directly too.) `replace`: the program npf_xdp takes the place of, in one
// step (XDP_FLAGS_REPLACE: the kernel refuses if it is not the one attached
// any more); null: the slot must be empty. Returns npf_xdp's id.
uint32_t attachDirectly(const AttachOptions& opt, const Interface& itf, Skeleton& sk, const NextProgram* next,
                        const NextProgram* replace)
{
    const int fd = bpf_program__fd(sk->progs.npf_xdp);
    pinProgram(fd, itf.name);
    const uint32_t mode = opt.mode == AttachMode::Native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
    LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = replace ? replace->fd.get() : 0);
    const uint32_t how = replace ? XDP_FLAGS_REPLACE : XDP_FLAGS_UPDATE_IF_NOEXIST;
    if (int err = bpf_xdp_attach(itf.ifindex, fd, how | mode, replace ? &opts : nullptr)) {
        err = -err;
        if (err == EEXIST || err == EBUSY)
            throw StateError(err, attachError(opt, itf, err, next));
        throw Error(err, attachError(opt, itf, err, next));
    }
    if (!next)
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

// Puts the program chained behind npf_xdp back on the interface in its place,
// in one step (XDP_FLAGS_REPLACE of npf's fd): what npf passed to it, it
// gets now without a gap.
ChainedProgram putBack(const Interface& itf, const XdpProgram& npf, int npfFd, int nextFd)
{
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(nextFd, &info, &len) != 0)
        throwErrno("read program info of " + pinPath(itf.name, NPF_NEXT_PROG_PIN));
    const ChainedProgram c{info.id, info.name};
    LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = npfFd);
    if (int err = bpf_xdp_attach(itf.ifindex, nextFd, slotFlag(npf.slot) | XDP_FLAGS_REPLACE, &opts))
        throw Error(-err, "put XDP program '" + c.name + "' (id " + std::to_string(c.id) + "), chained behind " +
                              NPF_PROG_NAME + ", in its place on " + itf.name + " (" + toString(npf.slot) +
                              "): " + std::strerror(-err) + "; " + NPF_PROG_NAME + " stays attached (npfctl detach --force " +
                              itf.name + " removes it and leaves no XDP program)");
    return c;
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
    bool takeOver = false;
    const std::optional<NextProgram> next = prepare(opt, itf, &res, &takeOver);

    LoadConfig cfg;
    cfg.queues = opt.queues ? opt.queues : std::min<uint32_t>(rxQueueCount(itf.name), NPF_MAX_QUEUES);
    // A program array takes programs of its owner's kind only: to chain a
    // program that is not frags-aware, npf_xdp is loaded so too.
    cfg.frags = !next || next->frags;
    if (next) {
        cfg.attachType = next->attachType;
        cfg.chain = true;
    }
    Skeleton sk = Skeleton::open(cfg);
    res.queues = sk.config().queues;
    res.pinDir = pinDir(itf.name);
    res.frags = cfg.frags;

    makePinDir(itf.name);
    PinGuard pins(itf.name);
    setPinPaths(sk, itf.name);
    if (next) {
        if (!next->frags)
            NPF_INFO("%s loaded without frags support to chain %s, which lacks it: packets larger than one buffer "
                     "(jumbo frames) are not received in native mode",
                     NPF_PROG_NAME, next->describe().c_str());
        sk.load();
        chainNext(bpf_map__fd(sk->maps.npf_next), *next, itf.name);
        res.progId = attachDirectly(opt, itf, sk, &*next, takeOver ? &*next : nullptr);
        res.chained = ChainedProgram{next->id, next->name};
        res.tookOver = takeOver;
    } else if (canOpenBpfById()) {
        res.progId = attachThroughLibxdp(opt, itf, sk);
    } else {
        sk.load();
        res.progId = attachDirectly(opt, itf, sk, nullptr, nullptr);
    }

    // Whether libxdp used its dispatcher, from what the kernel now runs on
    // the interface. Not xdp_multiprog__get_from_ifindex: libxdp 1.3 never
    // closes the program fd it opens there (xdp_multiprog__from_id), and a
    // long-lived engine would then hold npf_xdp (and its maps) alive after
    // its interface is gone.
    const XdpState after = queryXdp(itf.ifindex, res.progId);
    const XdpProgram* attached = after.npf();
    res.dispatcher = attached && attached->viaDispatcher;
    if (!res.dispatcher && canOpenBpfById() && !next)
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
        const Fd next = force || p->id != pinnedId ? Fd() : openChainedPin(itf.name);
        if (next)
            res.restored = putBack(itf, *p, pinned.get(), next.get());
        else
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
