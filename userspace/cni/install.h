// Puts npf-cni into a node's CNI setup, as the DaemonSet's init container
// does (deploy/k8s/daemonset.yaml): the binary into the plugin directory and
// {"type": "npf-cni", ...} at the end of the plugin chain of the network
// configuration the runtime uses: the first .conflist of the configuration
// directory by name (libcni's order; a .conf ahead of it is refused:
// chaining needs a list). Both written whole (a temporary file renamed), so
// a runtime never reads half of either. Idempotent: an entry that is there
// already is brought up to date, and nothing is written if it is.
#pragma once

#include <string>

namespace npf::cni {

struct InstallOptions {
    std::string binDir;   // where the runtime looks for plugins (/opt/cni/bin)
    std::string confDir;  // its network configurations (/etc/cni/net.d)
    std::string self;     // the npf-cni binary to copy ("" = no copy)
    std::string socket;   // npfd's pods socket, as the node sees it
    std::string stateDir; // npf-cni's records, as the node sees it
};

struct InstallResult {
    std::string conflist; // the file chained into
    bool changed = false; // it was written
};

// Throws naming the file and what is wrong with it.
InstallResult install(const InstallOptions& o);
// Takes npf-cni's entry out of the chain (the binary stays: a runtime may be
// running it for a pod right now).
InstallResult uninstall(const InstallOptions& o);

} // namespace npf::cni
