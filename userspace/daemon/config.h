// npfd's configuration file (JSON; // and /* */ comments allowed) and the
// client rules that decide who may use npfd and how much. Parsing is strict:
// an unknown or duplicate key, a mistyped value or a value out of range is an
// error naming the file, the key and the problem, so a typo never silently
// weakens a rule. docs/protocol.md ("Configuration") documents the format.
//
//   {
//     "ifaces": ["eth0", "pod-a:eth0"],       required, 1..64 interfaces: NAME, or
//                                             NETNS:NAME in another network namespace
//     "socket": "/run/npf/npfd.sock",         absolute path
//     "socket_group": "npf",                  group name or gid; null = root's
//     "spill_dir": "/var/tmp",                absolute path
//     "allow_root": true,                     root without a rule may do anything
//     "max_connections": 256,                 connections at once, all clients
//     "hello_timeout_ms": 5000,               a connection says hello within it
//     "client_install_wait_us": 1000,         pages go into a client's mapping (its memory
//                                             cgroup pays) unless that takes longer; 0 = never
//     "delegate": ["eth0"],                   interfaces whose data path npfd hands to their
//                                             one client (delegated mode); each one of "ifaces"
//     "pods_socket": "/run/npf/pods.sock",    where npf-cni hands over pods' listeners
//                                             (root only, mode 0600); absent = none
//     "clients": [
//       {"uid": 65534, "gid": null, "cgroup": null,
//        "ports": ["9000-9099", "5000"], "addr": "",
//        "region_bytes": 1073741824, "resident_bytes": 268435456, "flows": 64,
//        "connections": 16},              limits: totals over the rule's connections
//       {"pod": "tenant-a/*", "ports": ["9000"], ...}  a pod rule: clients that
//                                             came through a pod's listener (each pod
//                                             its own totals, flows on its own addresses)
//     ]
//   }
//
// Command-line overrides are the daemon's business: it edits a DaemonConfig.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npf::daemon {

inline constexpr const char* kDefaultSocket = "/run/npf/npfd.sock";
inline constexpr const char* kDefaultSpillDir = "/var/tmp";
// A rule's limits when it leaves them out.
inline constexpr uint64_t kDefaultRegionBytes = 1ull << 30;
inline constexpr uint64_t kDefaultResidentBytes = 256ull << 20;
inline constexpr uint32_t kDefaultFlows = 8;
inline constexpr uint32_t kDefaultConnections = 16;
// npfd-wide bounds.
inline constexpr uint32_t kDefaultMaxConnections = 256;
inline constexpr uint32_t kMaxConnections = 65536;
inline constexpr uint32_t kDefaultHelloTimeoutMs = 5000;
inline constexpr uint32_t kDefaultClientInstallWaitUs = 1000;

// Ports first..last, inclusive, 1 <= first <= last.
struct PortRange {
    uint16_t first = 0;
    uint16_t last = 0;
};

// A pod as npf-cni named it (CNI_ARGS): what a pod rule matches.
struct PodName {
    std::string_view ns, name;
};

// A rule's "pod": "NAMESPACE/NAME", either part "*" for any.
struct PodPattern {
    std::string ns, name; // "" = any
    bool matches(const PodName& p) const noexcept;
};

// Who a rule admits (every match field given must match; at least one is
// given) and what it allows them. A rule with "pod" admits only clients that
// connected through a pod's listener (npf-cni, docs/protocol.md "Pods"),
// and a rule without it only clients of npfd's socket: a pod's clients are
// known by their pod, whatever uid they run as. The limits are totals over every
// connection the rule admits at once, not per connection: a tenant does not
// get more by connecting again (write one rule per tenant).
struct ClientRule {
    std::optional<uid_t> uid;          // the peer's uid (SO_PEERCRED)
    std::optional<gid_t> gid;          // the peer's primary gid (SO_PEERCRED)
    std::optional<std::string> cgroup; // cgroup v2 path prefix, whole components ("/a" matches "/a/b", not "/ab")
    std::optional<PodPattern> pod;     // the pod a client connected through; its limits are per pod
    std::vector<PortRange> ports;      // ports it may open
    std::string addr;                  // "" = any address; else flows must use exactly this one
    uint64_t regionBytes = kDefaultRegionBytes;     // region bytes ("size") of all its connections
    uint64_t residentBytes = kDefaultResidentBytes; // resident budgets ("budget") of all its connections
    uint32_t flows = kDefaultFlows;                 // flows open at once, all its connections
    uint32_t connections = kDefaultConnections;     // connections at once (each has at most one region)

    // cgroup: the peer's (peerCgroup), "" when unknown (never matches a cgroup
    // rule). pod: the pod whose listener it came through; nullptr for npfd's socket.
    bool matches(uid_t uid, gid_t gid, std::string_view cgroup, const PodName* pod = nullptr) const;
    bool allowsPort(uint16_t port) const;
    // `addr` as a client asks for it in open_flow ("" = any); compared as
    // addresses, so "::1" and "0::1" are the same.
    bool allowsAddr(std::string_view addr) const;
};

// An interface npfd serves: NAME in npfd's own network namespace, or
// NETNS:NAME in another one, NETNS a name under /run/netns (`ip netns add`)
// or an absolute path (/proc/PID/ns/net). Interface names never contain ':'.
struct IfaceSpec {
    std::string netns;  // path; "" = npfd's own namespace
    std::string ifname; // in that namespace
};
// nullopt when `text` is not NAME or NETNS:NAME (the message in *why).
std::optional<IfaceSpec> parseIfaceSpec(std::string_view text, std::string* why);

struct DaemonConfig {
    std::vector<std::string> ifaces; // as written: parseIfaceSpec
    // Of those (as written), the ones npfd delegates: one client at a time
    // runs the data path in its own process (docs/architecture.md).
    std::vector<std::string> delegate;
    bool delegated(const std::string& label) const;
    std::string socket = kDefaultSocket;
    std::string socketGroup;           // "" = leave the group; else a name or a decimal gid
    std::string spillDir = kDefaultSpillDir;
    bool allowRoot = true;
    uint32_t maxConnections = kDefaultMaxConnections; // connections at once, every client together
    uint32_t helloTimeoutMs = kDefaultHelloTimeoutMs; // from accept to hello; then the connection is closed
    // How long a pager waits for an install through a client's userfaultfd
    // (RegionConfig::clientInstallWait); 0: npfd installs through its own
    // mapping and pays for its clients' pages.
    uint32_t clientInstallWaitUs = kDefaultClientInstallWaitUs;
    std::string podsSocket;            // "" = pods are not served (no npf-cni)
    std::vector<ClientRule> clients;   // in match order

    // The first rule that matches; else, for uid 0 with allowRoot and not
    // through a pod, a rule that allows every port and address and sets no
    // limits of its own (region and resident bytes and flows at their
    // maximum); else nullptr (the client is not allowed).
    const ClientRule* match(uid_t uid, gid_t gid, std::string_view cgroup, const PodName* pod = nullptr) const;
    // The connections each rule's clients may hold at once, all its pods
    // together: max_connections shared by the rules and one more share (for
    // root's and for clients no rule admits), at least 1.
    uint32_t tenantShare() const noexcept;
};

// The rule match() gives root with allowRoot: the operator's.
const ClientRule& rootRule();

// Parses the text of a config file. `origin` (the path) starts every error
// message. Throws std::system_error (EINVAL) whose what() is
// "<origin>: <key path>: <problem>", e.g.
// "/etc/npf/npfd.json: clients[0].ports[1]: \"9100-9000\": first port above last".
DaemonConfig parseConfig(std::string_view text, const std::string& origin = "npfd config");

// Reads and parses `path`; a file that cannot be read throws with its errno.
DaemonConfig loadConfig(const std::string& path);

} // namespace npf::daemon
