#include "dataplane/chain.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <cstring>
#include <fstream>

#include "dataplane/pins.h"
#include "npf/abi.h"
#include "sys/error.h"

namespace npf::dataplane {
namespace {

// True if fd is a BPF program (bpf_obj_get_info_by_fd would describe a map
// or a link as well, in their own structs).
bool isProgram(int fd)
{
    std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
    for (std::string line; std::getline(in, line);)
        if (line.rfind("prog_type:", 0) == 0)
            return true;
    return false;
}

// Kind and name of the program behind fd, checked to be chainable.
NextProgram describeNext(Fd fd, const std::string& what)
{
    if (!isProgram(fd.get()))
        throw ArgumentError(what + " is not a BPF program (a map?): name the pin of the XDP program to chain "
                                   "behind " + std::string(NPF_PROG_NAME));
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) != 0)
        throwErrno("read program info of " + what);
    if (info.type != BPF_PROG_TYPE_XDP)
        throw ArgumentError(what + " is not an XDP program (program type " + std::to_string(info.type) +
                            "): only an XDP program can run behind " + NPF_PROG_NAME);
    if (info.ifindex != 0)
        throw ArgumentError(what + " is bound to a device (offloaded or dev-bound): the kernel keeps such "
                                   "programs out of program arrays, so it cannot run behind " +
                            std::string(NPF_PROG_NAME));
    NextProgram p;
    p.id = info.id;
    p.name = info.name;
    const XdpKind kind = xdpKind(fd.get(), what);
    p.frags = kind.frags;
    p.attachType = kind.attachType;
    p.fd = std::move(fd);
    return p;
}

// An XDP program of `kind` that passes everything (r0 = XDP_PASS; exit).
Fd loadKindProbe(const XdpKind& kind)
{
    const bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = XDP_PASS},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = static_cast<bpf_attach_type>(kind.attachType),
                .prog_flags = kind.frags ? BPF_F_XDP_HAS_FRAGS : 0u);
    Fd fd(bpf_prog_load(BPF_PROG_TYPE_XDP, "npf_kind_probe", "Dual BSD/GPL", insns, std::size(insns), &opts));
    if (!fd)
        throwErrno("load an XDP probe program");
    return fd;
}

// True if a program array whose first program is of `kind` takes `fd`.
bool sameKind(int fd, const XdpKind& kind, const std::string& what)
{
    const Fd probe = loadKindProbe(kind);
    Fd array(bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "npf_kind_probe", sizeof(uint32_t), sizeof(uint32_t), 1,
                            nullptr));
    if (!array)
        throwErrno("create a program array to probe " + what);
    const uint32_t key = 0;
    int value = probe.get();
    if (bpf_map_update_elem(array.get(), &key, &value, BPF_ANY) != 0)
        throwErrno("put an XDP probe program into its program array");
    value = fd;
    if (bpf_map_update_elem(array.get(), &key, &value, BPF_ANY) == 0)
        return true;
    if (errno == EINVAL)
        return false;
    throwErrno("probe the kind of " + what);
}

} // namespace

std::string NextProgram::describe() const { return "'" + name + "' (id " + std::to_string(id) + ")"; }

XdpKind xdpKind(int fd, const std::string& what)
{
    // libbpf's loaders (bpftool, iproute2, libxdp, skeletons) say BPF_XDP;
    // the most likely kinds first.
    for (const XdpKind k : {XdpKind{false, BPF_XDP}, XdpKind{true, BPF_XDP}, XdpKind{false, 0}, XdpKind{true, 0}})
        if (sameKind(fd, k, what))
            return k;
    throw ArgumentError(what + " goes into no program array of XDP programs (a kind npf cannot load npf_xdp "
                               "as): it cannot run behind " + std::string(NPF_PROG_NAME));
}

NextProgram openNextPin(const std::string& path)
{
    Fd fd(bpf_obj_get(path.c_str()));
    if (!fd) {
        const int err = errno;
        const std::string what = "--then " + path + ": " + std::strerror(err);
        if (err == ENOENT)
            throw ArgumentError(what + " (pin the program in bpffs first, e.g. bpftool prog pin id ID " + path + ")");
        throw Error(err, what);
    }
    return describeNext(std::move(fd), path);
}

NextProgram openNextAttached(const XdpProgram& prog, const std::string& ifname)
{
    const std::string what = "XDP program " + prog.shownName() + " (id " + std::to_string(prog.id) + ") on " + ifname;
    Fd fd(bpf_prog_get_fd_by_id(prog.id));
    if (!fd) {
        const int err = errno;
        if (err == EPERM || err == EACCES)
            throw Error(err, "take over " + what + ": " + std::strerror(err) +
                                 " — opening a program by id needs CAP_SYS_ADMIN; without it, pin the program "
                                 "(bpftool prog pin id " + std::to_string(prog.id) +
                                 " PATH, as root) and use --then PATH");
        throw Error(err, "take over " + what + ": " + std::strerror(err));
    }
    return describeNext(std::move(fd), what);
}

void chainNext(int mapFd, const NextProgram& next, const std::string& ifname)
{
    const uint32_t key = NPF_NEXT_SLOT;
    const int value = next.fd.get();
    if (bpf_map_update_elem(mapFd, &key, &value, BPF_ANY) != 0)
        throwErrno("chain XDP program " + next.describe() + " behind " + NPF_PROG_NAME + " on " + ifname +
                   " (the kernel refused it for npf_next: a program of another kind than npf_xdp as loaded)");
    const std::string path = pinPath(ifname, NPF_NEXT_PROG_PIN);
    checkNeg(bpf_obj_pin(next.fd.get(), path.c_str()) ? -errno : 0,
             "pin the chained XDP program " + next.describe() + " at " + path);
}

Fd openChainedPin(const std::string& ifname)
{
    const std::string path = pinPath(ifname, NPF_NEXT_PROG_PIN);
    Fd fd(bpf_obj_get(path.c_str()));
    if (!fd && errno != ENOENT)
        throwErrno("open the chained XDP program pinned at " + path);
    return fd;
}

std::optional<ChainedProgram> chainedProgram(const std::string& ifname)
{
    const std::string mapPath = pinPath(ifname, NPF_NEXT_MAP);
    const Fd map(bpf_obj_get(mapPath.c_str()));
    if (!map) {
        if (errno == ENOENT)
            return std::nullopt;
        throwErrno("open the pinned map " + mapPath);
    }
    const uint32_t key = NPF_NEXT_SLOT;
    uint32_t id = 0; // a program array read from user space gives the program's id
    if (bpf_map_lookup_elem(map.get(), &key, &id) != 0) {
        if (errno == ENOENT)
            return std::nullopt;
        throwErrno("read slot " + std::to_string(key) + " of " + mapPath);
    }
    ChainedProgram c{id, ""};
    if (const Fd pinned = openChainedPin(ifname)) {
        bpf_prog_info info{};
        uint32_t len = sizeof(info);
        if (bpf_obj_get_info_by_fd(pinned.get(), &info, &len) == 0 && info.id == id)
            c.name = info.name;
    }
    return c;
}

} // namespace npf::dataplane
