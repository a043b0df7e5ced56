// Attach npf_xdp to an interface (through libxdp, maps pinned under
// NPF_PIN_ROOT/<ifname>/) and detach it again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/mode.h"
#include "dataplane/xdp_state.h"
#include "npf/abi.h"

namespace npf::dataplane {

struct AttachOptions {
    std::string ifname;
    AttachMode mode = AttachMode::Native;
    uint32_t queues = 0;                              // 0: the interface's RX queue count, capped at NPF_MAX_QUEUES
    bool force = false;                               // replace a foreign XDP program
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
};

// Throws ArgumentError for bad options, ENODEV for an unknown interface,
// StateError if npf is already attached or a foreign program is attached
// (and not `force`); EOPNOTSUPP (with "try --mode ...") if the mode is not
// supported. Pins the program beside its maps (pins.h). Without
// CAP_SYS_ADMIN it attaches directly instead of through libxdp.
AttachResult attach(const AttachOptions& opt);

struct DetachResult {
    bool detached = false;              // npf's program was removed
    uint32_t progId = 0;
    bool removedPins = false;
    std::vector<XdpProgram> foreignRemoved;  // force
    std::vector<XdpProgram> foreignLeft;     // not force
};

// Idempotent. Removes npf's program (and foreign ones with `force`, which
// needs CAP_SYS_ADMIN to open them by id) and the pin directory. An
// interface that no longer exists is ENODEV unless `force`, which then only
// removes its pins.
DetachResult detach(const std::string& ifname, bool force = false);

} // namespace npf::dataplane
