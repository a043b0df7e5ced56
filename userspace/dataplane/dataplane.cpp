#include "dataplane/dataplane.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <algorithm>

#include "dataplane/bpf_info.h"
#include "dataplane/iface.h"
#include "dataplane/pins.h"
#include "dataplane/privileges.h"
#include "dataplane/xdp_state.h"
#include "npf/abi.h"
#include "sys/error.h"

namespace npf::dataplane {
namespace {

// Expected shape of each pinned map, in kPinnedMaps order (0 = any max_entries).
struct MapShape {
    bpf_map_type type;
    uint32_t key, value, maxEntries;
};
constexpr MapShape kShapes[] = {
    {BPF_MAP_TYPE_HASH, sizeof(npf_flow_key), sizeof(npf_flow), NPF_MAX_FLOWS},
    {BPF_MAP_TYPE_ARRAY_OF_MAPS, sizeof(uint32_t), sizeof(uint32_t), NPF_MAX_FLOWS},
    {BPF_MAP_TYPE_ARRAY_OF_MAPS, sizeof(uint32_t), sizeof(uint32_t), NPF_MAX_FLOWS},
    {BPF_MAP_TYPE_ARRAY_OF_MAPS, sizeof(uint32_t), sizeof(uint32_t), NPF_MAX_FLOWS},
    {BPF_MAP_TYPE_ARRAY_OF_MAPS, sizeof(uint32_t), sizeof(uint32_t), NPF_MAX_FLOWS},
    {BPF_MAP_TYPE_ARRAY_OF_MAPS, sizeof(uint32_t), sizeof(uint32_t), NPF_MAX_FLOWS},
    {BPF_MAP_TYPE_ARRAY_OF_MAPS, sizeof(uint32_t), sizeof(uint32_t), NPF_MAX_FLOWS},
    {BPF_MAP_TYPE_XSKMAP, sizeof(uint32_t), sizeof(uint32_t), 0},
    {BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(uint32_t), sizeof(uint64_t), NPF_STAT_MAX},
    {BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(uint32_t), sizeof(npf_flow_stats), NPF_MAX_FLOWS},
};
static_assert(std::size(kShapes) == kPinnedMaps.size());

Fd openPin(const std::string& ifname, size_t i, bpf_map_info* info)
{
    std::string path = pinPath(ifname, kPinnedMaps[i]);
    Fd fd(bpf_obj_get(path.c_str()));
    if (!fd) {
        if (errno == ENOENT)
            throw StateError(ENOENT, "npf is attached to " + ifname + " but its pin " + path +
                                         " is missing: re-attach (npfctl detach " + ifname + "; npfctl attach " +
                                         ifname + ")");
        throwErrno("open pinned map " + path);
    }
    *info = mapInfo(fd.get(), path);
    const MapShape& s = kShapes[i];
    if (info->type != s.type || info->key_size != s.key || info->value_size != s.value ||
        (s.maxEntries && info->max_entries != s.maxEntries))
        throw StateError(EPROTO, "pinned map " + path + " does not match this npf's ABI (version " +
                                     std::to_string(NPF_ABI_VERSION) + "): detach and re-attach with this build");
    return fd;
}

} // namespace

Fd openPinnedProgram(const std::string& ifname, uint32_t* id)
{
    *id = 0;
    const std::string path = pinPath(ifname, kProgPin);
    Fd fd(bpf_obj_get(path.c_str()));
    if (!fd) {
        if (errno == ENOENT)
            return fd;
        throwErrno("open the pinned program " + path);
    }
    *id = progInfo(fd.get(), path).id;
    return fd;
}

Dataplane Dataplane::open(const std::string& ifname)
{
    validateIfname(ifname);
    requireBpfPrivileges("open the npf instance on " + ifname);
    Interface itf = resolveInterface(ifname);
    uint32_t pinnedId = 0;
    const Fd pinned = openPinnedProgram(itf.name, &pinnedId);
    XdpState st = queryXdp(itf.ifindex, pinnedId);
    const XdpProgram* prog = st.npf();
    if (!prog)
        throw StateError(ENOENT, "npf is not attached to " + ifname + " (npfctl attach " + ifname + ")");
    if (prog->id != pinnedId)
        throw StateError(ESTALE, "npf_xdp prog id " + std::to_string(prog->id) + " on " + ifname +
                                     " is not the program pinned at " + pinPath(itf.name, kProgPin) +
                                     " (attached by an npf that did not pin it, or pins of a same-named interface "
                                     "in another network namespace): npfctl detach " + ifname + "; npfctl attach " +
                                     ifname);
    Dataplane dp;
    dp.ifname_ = itf.name;
    dp.pinDir_ = dataplane::pinDir(itf.name);
    dp.ifindex_ = itf.ifindex;
    dp.progId_ = prog->id;
    dp.mode_ = prog->slot == XdpSlot::Skb ? AttachMode::Skb : AttachMode::Native;

    Fd* fds[] = {&dp.flows_,      &dp.rings_,      &dp.regions_[0], &dp.regions_[1], &dp.regions_[2],
                 &dp.regions_[3], &dp.regions_[4], &dp.xsks_,       &dp.stats_,      &dp.flowStats_};
    static_assert(NPF_BITMAP_CLASSES == 5);
    static_assert(std::size(fds) == kPinnedMaps.size());
    const std::vector<uint32_t> used = progInfo(pinned.get(), pinPath(itf.name, kProgPin)).mapIds;
    for (size_t i = 0; i < kPinnedMaps.size(); ++i) {
        bpf_map_info info{};
        *fds[i] = openPin(ifname, i, &info);
        if (std::find(used.begin(), used.end(), info.id) == used.end())
            throw StateError(ESTALE, "the pins at " + dataplane::pinDir(ifname) + " are not the maps of " +
                                         NPF_PROG_NAME + " prog id " + std::to_string(prog->id) + " on " + ifname +
                                         ": npfctl detach " + ifname + "; npfctl attach " + ifname);
        if (fds[i] == &dp.xsks_)
            dp.queues_ = info.max_entries / 2;
    }
    return dp;
}

} // namespace npf::dataplane
