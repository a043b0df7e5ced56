// What XDP programs are attached to an interface, and which one is npf's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npf::dataplane {

// Where a program is attached (XDP_FLAGS_*_MODE).
enum class XdpSlot { Native, Skb, Hw };

const char* toString(XdpSlot s);
// The XDP_FLAGS_*_MODE flag of a slot.
uint32_t slotFlag(XdpSlot s);

struct XdpProgram {
    uint32_t id = 0;
    // "" when it could not be read: opening a program by id needs
    // CAP_SYS_ADMIN, and npf's own program is known by its pin instead.
    std::string name;
    XdpSlot slot = XdpSlot::Native;
    bool viaDispatcher = false; // a component of libxdp's dispatcher
    bool isNpf() const;
    // The name, or what to say instead when it is unknown.
    std::string shownName() const;
};

struct XdpState {
    std::vector<XdpProgram> programs; // attached programs, dispatcher components instead of dispatchers

    // npf's program, or nullptr.
    const XdpProgram* npf() const;
    // The programs that are not npf's.
    std::vector<XdpProgram> foreign() const;
};

// Reads the XDP state of `ifindex` (in this network namespace). `npfId`:
// the id of npf's program as its pin says (0: none), which is npf's whether
// or not its name can be read; the names of the others are read by id.
XdpState queryXdp(int ifindex, uint32_t npfId);

// Removes the program `prog` from `ifindex`, and only that program: the kernel
// refuses if another program took its place meanwhile. `progFd`: the
// program's fd if this process holds one (npf's, from its pin); else it is
// opened by id, which needs CAP_SYS_ADMIN, as libxdp's dispatcher does.
void detachProgram(int ifindex, const std::string& ifname, const XdpProgram& prog, int progFd = -1);

} // namespace npf::dataplane
