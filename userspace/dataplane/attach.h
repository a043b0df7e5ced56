// Attach npf_xdp to an interface (through libxdp, maps pinned under
// NPF_PIN_ROOT/<ifname>/) and detach it again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/chain.h"
#include "dataplane/mode.h"
#include "dataplane/xdp_state.h"
#include "npf/abi.h"

namespace npf::dataplane {

struct AttachOptions {
    std::string ifname;
    AttachMode mode = AttachMode::Native;
    uint32_t queues = 0;                              // 0: the interface's RX queue count, capped at NPF_MAX_QUEUES
    bool force = false;                               // replace a foreign XDP program
    // An XDP program to chain behind npf_xdp (chain.h): it gets every packet
    // npf passes. The one pinned at thenPin, or (thenExisting) the one
    // attached to the interface in `mode`'s slot. Either is taken over if it
    // is the one attached there: npf_xdp replaces it atomically.
    std::string thenPin;
    bool thenExisting = false;
};

struct AttachResult {
    std::string ifname;
    int ifindex = 0;
    AttachMode mode = AttachMode::Native;
    uint32_t progId = 0;
    uint32_t queues = 0;
    std::string pinDir;
    bool dispatcher = false;            // false: libxdp fell back to a single program
    std::vector<XdpProgram> replaced;   // foreign programs removed (force)
    bool removedStalePins = false;
    std::optional<ChainedProgram> chained; // the program behind npf_xdp
    bool tookOver = false;              // it was attached to the interface, npf_xdp took its place
    bool frags = true;                  // npf_xdp loaded frags-aware (false: to chain a program that is not)
};

// Throws ArgumentError for bad options, ENODEV for an unknown interface,
// StateError if npf is already attached or a foreign program is attached
// (and not `force`, nor the one chained); EOPNOTSUPP (with "try --mode ...")
// if the mode is not supported. Pins the program beside its maps (pins.h).
// Without CAP_SYS_ADMIN, or to chain a program, it attaches directly instead
// of through libxdp.
AttachResult attach(const AttachOptions& opt);

struct DetachResult {
    bool detached = false;              // npf's program was removed
    uint32_t progId = 0;
    bool removedPins = false;
    std::optional<ChainedProgram> restored;  // the chained program, put back in npf's place
    std::vector<XdpProgram> foreignRemoved;  // force
    std::vector<XdpProgram> foreignLeft;     // not force
};

// Idempotent. Removes npf's program (and foreign ones with `force`, which
// needs CAP_SYS_ADMIN to open them by id) and the pin directory. A program
// chained behind npf_xdp takes its place (atomically), unless `force`. An
// interface that no longer exists is ENODEV unless `force`, which then only
// removes its pins.
DetachResult detach(const std::string& ifname, bool force = false);

} // namespace npf::dataplane
