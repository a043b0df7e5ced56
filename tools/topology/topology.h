// Network topology for test rigs and benchmarks: named network namespaces and
// veth pairs that are always removed, and a guard that moves the calling
// thread into a namespace. Shells out to ip(8) and ethtool(8); needs root.
#pragma once

#include <string>

#include "sys/fd.h"

namespace npf::topology {

// Runs a shell command; returns its exit status (-1 if it could not run).
int sh(const std::string& cmd);
// Runs a shell command and returns its stdout; *status gets the exit status.
std::string shOut(const std::string& cmd, int* status = nullptr);

// A name unique to this process and call: prefix + pid + counter, at most 15
// characters (interface names are limited to IFNAMSIZ - 1).
std::string uniqueName(const std::string& prefix);

// `ip netns add` on construction, `ip netns del` on destruction.
class Netns {
public:
    explicit Netns(const std::string& prefix = "npf");
    ~Netns();
    Netns(const Netns&) = delete;
    Netns& operator=(const Netns&) = delete;

    const std::string& name() const { return name_; }
    std::string path() const { return "/run/netns/" + name_; }
    // Prefix that runs a command in this namespace without hiding bpffs.
    std::string exec() const { return "nsenter --net=" + path() + " "; }

private:
    std::string name_;
};

// Moves the calling thread into a namespace until destruction.
class NetnsGuard {
public:
    explicit NetnsGuard(const Netns& ns);
    ~NetnsGuard();
    NetnsGuard(const NetnsGuard&) = delete;
    NetnsGuard& operator=(const NetnsGuard&) = delete;

private:
    Fd orig_;
};

// Two namespaces joined by a veth pair:
//   rx ns: dev rxIf, 198.18.<n>.1/30    tx ns: dev txIf, 198.18.<n>.2/30
// Both ends up, static neighbour entries so no ARP is needed.
struct VethOptions {
    int queues = 1; // numrxqueues/numtxqueues of both ends
    int mtu = 1500;
    bool txChecksumOffload = false; // on: locally sent UDP arrives with partial checksums
    // The rx end's name inside its namespace (e.g. "eth0", as a pod's
    // interface); empty = a unique name. Only the namespace's own: the veth
    // is created under a unique name and renamed there.
    std::string rxName;
};

class VethPair {
public:
    explicit VethPair(VethOptions opt = {});
    ~VethPair();
    VethPair(const VethPair&) = delete;
    VethPair& operator=(const VethPair&) = delete;

    Netns& rxNs() { return rx_; }
    Netns& txNs() { return tx_; }
    const Netns& rxNs() const { return rx_; }
    const Netns& txNs() const { return tx_; }
    const std::string& rxIf() const { return rxIf_; }
    const std::string& txIf() const { return txIf_; }
    const std::string& rxAddr() const { return rxAddr_; }
    const std::string& txAddr() const { return txAddr_; }
    const std::string& rxMac() const { return rxMac_; }
    const std::string& txMac() const { return txMac_; }

private:
    Netns rx_, tx_;
    std::string rxIf_, txIf_, rxAddr_, txAddr_, rxMac_, txMac_;
};

} // namespace npf::topology
