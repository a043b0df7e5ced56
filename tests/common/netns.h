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

} // namespace npf::test
