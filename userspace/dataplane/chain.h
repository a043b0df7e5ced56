// The XDP program chained behind npf_xdp: every packet npf passes is
// tail-called into it (npf_next, abi.h), so npf and another XDP program (a
// CNI's) share one interface without libxdp's dispatcher. Chosen by its pin
// (npfctl attach --then PATH) or taken over from the interface
// (--then-existing); detach puts it back in npf's place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dataplane/xdp_state.h"
#include "sys/fd.h"

namespace npf::dataplane {

// An XDP program to chain, held open.
struct NextProgram {
    Fd fd;
    uint32_t id = 0;
    std::string name;
    bool frags = false;          // frags-aware (loaded with BPF_F_XDP_HAS_FRAGS)
    uint32_t attachType = 0;     // its expected_attach_type: BPF_XDP (libbpf's) or 0 (raw loaders)
    std::string describe() const; // "'name' (id N)"
};

// The program pinned at `path`. Throws naming it if it is not an XDP
// program that can run from a program array.
NextProgram openNextPin(const std::string& path);

// The program `prog` attached to `ifname`, opened by id: the kernel allows
// that with CAP_SYS_ADMIN only, which the error says (and the way around it).
NextProgram openNextAttached(const XdpProgram& prog, const std::string& ifname);

// The kind of XDP program that a program array holding `fd` takes.
struct XdpKind {
    bool frags = false;
    uint32_t attachType = 0; // expected_attach_type
};

// The kind of the XDP program `fd` (bpf_prog_info shows neither), by the
// kernel's own rule: a program array takes only programs of its first one's
// kind (type, JIT, frags and, on 6.18, expected_attach_type), so `fd` goes
// into fresh arrays whose first program is a tiny one of each kind in turn.
// Throws naming `what` if no kind fits.
XdpKind xdpKind(int fd, const std::string& what);

// Puts `next` into slot NPF_NEXT_SLOT of npf_next (`mapFd`, its owner
// npf_xdp) and pins it as NPF_NEXT_PROG_PIN of ifname's instance.
void chainNext(int mapFd, const NextProgram& next, const std::string& ifname);

// The chained program of ifname's instance (its pin), an empty Fd if none.
Fd openChainedPin(const std::string& ifname);

struct ChainedProgram {
    uint32_t id = 0;
    std::string name; // from its pin; "" if the slot holds another program than the pinned one
};

// What slot NPF_NEXT_SLOT of ifname's npf_next holds; nullopt if empty or
// the instance has no npf_next pin.
std::optional<ChainedProgram> chainedProgram(const std::string& ifname);

} // namespace npf::dataplane
