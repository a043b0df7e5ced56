// bpffs and the pin directory of an npf instance:
// NPF_PIN_ROOT/netns-<inode>/<ifname>/<map>.
//
// bpffs is global while interface names are per network namespace: the
// directory is keyed by the namespace (its nsfs inode number, the number in
// `readlink /proc/self/ns/net`) of the calling thread, so two namespaces with
// an eth0 each run an instance each. Dataplane::open still detects pins that
// belong to another instance (an inode number reused after its namespace died).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace npf::dataplane {

inline constexpr const char* kBpffsPath = "/sys/fs/bpf";

// The maps an instance pins, by their BPF names (also the pin file names).
inline constexpr std::array<const char*, 10> kPinnedMaps = {
    "npf_flows",     "npf_rings",     "npf_regions_0", "npf_regions_1", "npf_regions_2",
    "npf_regions_3", "npf_regions_4", "npf_xsks",      "npf_stats",     "npf_flow_stats",
};

// npf's program is pinned beside its maps (pinPath(ifname, kProgPin)), and
// each flow's post ring map too (ringPinPath): what npf attached and the
// rings of its flows are opened through their pins, which needs file
// permissions only, not by id, which needs CAP_SYS_ADMIN.
inline constexpr const char* kProgPin = "npf_xdp";
// The pin of flow id `id`'s post ring, the map npf_rings[id] holds.
std::string ringPinPath(const std::string& pinDir, uint32_t id);

// True if `path` is a bpffs mount (statfs magic BPF_FS_MAGIC).
bool isBpffs(const std::string& path);

// Makes sure /sys/fs/bpf is a bpffs mount, mounting it (and saying so) if not.
// Throws naming what to do when it cannot be mounted.
void ensureBpffs();

// NPF_PIN_ROOT/netns-<inode> of the calling thread's network namespace.
std::string netnsDir();
// netnsDir()/<ifname>
std::string pinDir(const std::string& ifname);
std::string pinPath(const std::string& ifname, const char* map);

bool pinDirExists(const std::string& ifname);

// Creates pinDir(ifname) and its parents.
void makePinDir(const std::string& ifname);

// Removes the pins in pinDir(ifname) and the directory (and netnsDir() once
// empty). Returns false if there was nothing to remove.
bool removePinDir(const std::string& ifname);

// Interface names that have a pin directory in this namespace, sorted.
std::vector<std::string> pinnedInterfaces();

} // namespace npf::dataplane
