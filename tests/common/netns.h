// Test topology: the namespaces and veth pairs of tools/topology (shared with
// npf-bench) under their test names, and where npf keeps a namespace's state.
#pragma once

#include <string>

#include "topology.h"

namespace npf::test {

using topology::Netns;
using topology::NetnsGuard;
using topology::sh;
using topology::shOut;
using topology::uniqueName;
using topology::VethOptions;
using topology::VethPair;

// Where npf keeps the state of `ifname` in namespace `ns` (keyed by the
// namespace's inode, see userspace/dataplane/pins.h): its pin directory under
// bpffs and its engine snapshot directory under /run/npf.
std::string pinDirOf(const Netns& ns, const std::string& ifname);
std::string runDirOf(const Netns& ns, const std::string& ifname);

// True when running as root (tests that need it skip otherwise).
bool isRoot();

// The veth pair of an npf end-to-end test: IPv6 off on both ends where it
// can be (the kernel's ND/MLD packets would add to the counters), and at the
// end whatever npf left on the rx end (program, pins, engine snapshot
// directory) removed, even after a test failed half-way. The namespaces take
// the veths with them.
class NpfVeth {
public:
    // npfctl: the binary that detaches npf at the end.
    NpfVeth(VethOptions opt, std::string npfctl);
    ~NpfVeth();
    NpfVeth(const NpfVeth&) = delete;
    NpfVeth& operator=(const NpfVeth&) = delete;

    VethPair& veth() { return veth_; }
    const std::string& rxIf() const { return veth_.rxIf(); }
    const std::string& rxAddr() const { return veth_.rxAddr(); }
    const std::string& txAddr() const { return veth_.txAddr(); }
    // Whether IPv6 could be disabled on both ends: counter deltas are exact then.
    bool ipv6Off() const { return ipv6Off_; }
    std::string pinDir() const { return pinDirOf(veth_.rxNs(), rxIf()); }
    std::string runDir() const { return runDirOf(veth_.rxNs(), rxIf()); }

protected:
    VethPair veth_;

private:
    std::string npfctl_;
    bool ipv6Off_ = true;
};

} // namespace npf::test
