// bpffs and the pin directory of an npf instance: NPF_PIN_ROOT/<ifname>/<map>.
//
// Pins are global (bpffs is not per network namespace) while interface names
// are per namespace: two namespaces with a same-named interface share one pin
// directory. Dataplane::open detects pins that belong to another instance.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace npf::ctl {

inline constexpr const char* kBpffsPath = "/sys/fs/bpf";

// The maps an instance pins, by their BPF names (also the pin file names).
inline constexpr std::array<const char*, 6> kPinnedMaps = {
    "npf_flows", "npf_posts", "npf_cursors", "npf_resident", "npf_xsks", "npf_stats",
};

// True if `path` is a bpffs mount (statfs magic BPF_FS_MAGIC).
bool isBpffs(const std::string& path);

// Makes sure /sys/fs/bpf is a bpffs mount, mounting it (and saying so) if not.
// Throws naming what to do when it cannot be mounted.
void ensureBpffs();

// NPF_PIN_ROOT/<ifname>
std::string pinDir(const std::string& ifname);
std::string pinPath(const std::string& ifname, const char* map);

bool pinDirExists(const std::string& ifname);

// Creates NPF_PIN_ROOT/<ifname> (and NPF_PIN_ROOT).
void makePinDir(const std::string& ifname);

// Removes the pins in NPF_PIN_ROOT/<ifname> and the directory. Returns false
// if there was nothing to remove.
bool removePinDir(const std::string& ifname);

// Interface names that have a pin directory, sorted.
std::vector<std::string> pinnedInterfaces();

} // namespace npf::ctl
