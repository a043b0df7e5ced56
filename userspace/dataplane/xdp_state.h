// What XDP programs are attached to an interface, and which one is npf's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npf::dataplane {

// Where a program is attached (XDP_FLAGS_*_MODE).
enum class XdpSlot { Native, Skb, Hw };

const char* toString(XdpSlot s);

struct XdpProgram {
    uint32_t id = 0;
    std::string name;
    XdpSlot slot = XdpSlot::Native;
    bool viaDispatcher = false; // a component of libxdp's dispatcher
    bool isNpf() const;
};

struct XdpState {
    std::vector<XdpProgram> programs; // attached programs, dispatcher components instead of dispatchers

    // npf's program, or nullptr.
    const XdpProgram* npf() const;
    // The programs that are not npf's.
    std::vector<XdpProgram> foreign() const;
};

// Reads the XDP state of `ifindex` (in this network namespace).
XdpState queryXdp(int ifindex);

// Removes the program `prog` from `ifindex`, and only that program: the kernel
// refuses if another program took its place meanwhile.
void detachProgram(int ifindex, const std::string& ifname, const XdpProgram& prog);

} // namespace npf::dataplane
