// Handle on a running npf instance: the fds of its pinned maps.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "dataplane/mode.h"
#include "npf/abi.h"
#include "sys/fd.h"

namespace npf::dataplane {

class Dataplane {
public:
    // Opens the instance attached to `ifname` in this network namespace,
    // through its pins (the program's and the maps'): no object is opened by
    // id, so CAP_BPF and CAP_NET_ADMIN are enough. Throws ENODEV for an
    // unknown interface, StateError(ENOENT) if npf is not attached,
    // StateError if the pins are missing or belong to another instance, and
    // an error naming the map if a pin does not match the ABI.
    static Dataplane open(const std::string& ifname);

    int flows() const noexcept { return flows_.get(); }
    int rings() const noexcept { return rings_.get(); }     // flow id -> post ring map
    // flow id -> resident bitmap map, one outer array per bitmap size class
    int regions(uint32_t cls) const noexcept { return regions_[cls].get(); }
    int xsks() const noexcept { return xsks_.get(); }
    int stats() const noexcept { return stats_.get(); }
    int flowStats() const noexcept { return flowStats_.get(); } // flow id -> npf_flow_stats, per CPU

    const std::string& ifname() const noexcept { return ifname_; }
    // The pin directory, of the namespace the instance was opened in.
    const std::string& pinDir() const noexcept { return pinDir_; }
    int ifindex() const noexcept { return ifindex_; }
    uint32_t progId() const noexcept { return progId_; }
    AttachMode mode() const noexcept { return mode_; }
    uint32_t queues() const noexcept { return queues_; }           // npf_xsks max_entries / 2

private:
    Dataplane() = default;

    Fd flows_, rings_, xsks_, stats_, flowStats_;
    std::array<Fd, NPF_BITMAP_CLASSES> regions_;
    std::string ifname_, pinDir_;
    int ifindex_ = 0;
    uint32_t progId_ = 0;
    AttachMode mode_ = AttachMode::Native;
    uint32_t queues_ = 0;
};

// npf's program as pinned for `ifname` (pins.h, kProgPin); an empty Fd if
// there is no such pin, and *id its program id (0 then).
Fd openPinnedProgram(const std::string& ifname, uint32_t* id);

} // namespace npf::dataplane
