// npfd's config file: the documented example parses, defaults hold, every
// mistake is an error naming the key, rules match in order, root's fallback.
#include "daemon/config.h"
#include "../ipc/ipc_test_util.h" // header-only

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>

namespace npf::test {
namespace {

using namespace npf::daemon;

const char* const kExample = R"({
  // the example of docs/protocol.md
  "ifaces": ["eth0"],
  "socket": "/run/npf/npfd.sock",
  "socket_group": "npf",
  "spill_dir": "/var/tmp",
  "clients": [
    {"uid": 65534, "gid": null, "cgroup": null,
     "ports": ["9000-9099", "5000"], "addr": "",
     "region_bytes": 1073741824, "resident_bytes": 268435456, "flows": 64}
  ]
})";

std::string errorOf(const std::string& text)
{
    try {
        parseConfig(text, "test.json");
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EINVAL) << e.what();
        return e.what();
    }
    return "(no error)";
}

TEST(Config, TheExampleParses)
{
    DaemonConfig c = parseConfig(kExample);
    EXPECT_EQ(c.ifaces, std::vector<std::string>{"eth0"});
    EXPECT_EQ(c.socket, "/run/npf/npfd.sock");
    EXPECT_EQ(c.socketGroup, "npf");
    EXPECT_EQ(c.spillDir, "/var/tmp");
    EXPECT_TRUE(c.allowRoot);
    ASSERT_EQ(c.clients.size(), 1u);
    const ClientRule& r = c.clients[0];
    EXPECT_EQ(r.uid, 65534u);
    EXPECT_FALSE(r.gid);
    EXPECT_FALSE(r.cgroup);
    ASSERT_EQ(r.ports.size(), 2u);
    EXPECT_EQ(r.ports[0].first, 9000);
    EXPECT_EQ(r.ports[0].last, 9099);
    EXPECT_EQ(r.ports[1].first, 5000);
    EXPECT_EQ(r.ports[1].last, 5000);
    EXPECT_EQ(r.addr, "");
    EXPECT_EQ(r.regionBytes, 1ull << 30);
    EXPECT_EQ(r.residentBytes, 256ull << 20);
    EXPECT_EQ(r.flows, 64u);
}

// NAME in npfd's namespace, NETNS:NAME in another (a /run/netns name or a path).
TEST(Config, InterfacesInOtherNetworkNamespaces)
{
    std::string why;
    const auto own = parseIfaceSpec("eth0", &why);
    ASSERT_TRUE(own);
    EXPECT_EQ(own->netns, "");
    EXPECT_EQ(own->ifname, "eth0");
    const auto named = parseIfaceSpec("pod-a:eth0", &why);
    ASSERT_TRUE(named);
    EXPECT_EQ(named->netns, "/run/netns/pod-a");
    EXPECT_EQ(named->ifname, "eth0");
    const auto path = parseIfaceSpec("/proc/42/ns/net:veth1", &why);
    ASSERT_TRUE(path);
    EXPECT_EQ(path->netns, "/proc/42/ns/net");
    EXPECT_EQ(path->ifname, "veth1");
    DaemonConfig c = parseConfig(R"({"ifaces": ["eth0", "pod-a:eth0", "/run/netns/pod-b:eth0"]})");
    EXPECT_EQ(c.ifaces, (std::vector<std::string>{"eth0", "pod-a:eth0", "/run/netns/pod-b:eth0"}));
}

TEST(Config, Defaults)
{
    DaemonConfig c = parseConfig(R"({"ifaces": ["veth0", "veth1"],
                                     "clients": [{"gid": 100, "ports": [7000]}]})");
    EXPECT_EQ(c.ifaces.size(), 2u);
    EXPECT_EQ(c.socket, kDefaultSocket);
    EXPECT_EQ(c.socketGroup, "");
    EXPECT_EQ(c.spillDir, kDefaultSpillDir);
    EXPECT_TRUE(c.allowRoot);
    const ClientRule& r = c.clients.at(0);
    EXPECT_EQ(r.regionBytes, kDefaultRegionBytes);
    EXPECT_EQ(r.residentBytes, kDefaultResidentBytes);
    EXPECT_EQ(r.flows, kDefaultFlows);
    EXPECT_EQ(r.connections, kDefaultConnections);
    EXPECT_EQ(r.addr, "");
    EXPECT_EQ(c.maxConnections, kDefaultMaxConnections);
    EXPECT_EQ(c.helloTimeoutMs, kDefaultHelloTimeoutMs);
    const DaemonConfig set = parseConfig(R"({"ifaces":["e"],"max_connections":3,"hello_timeout_ms":100,
                                             "clients":[{"uid":1,"ports":[1],"connections":2}]})");
    EXPECT_EQ(set.maxConnections, 3u);
    EXPECT_EQ(set.helloTimeoutMs, 100u);
    EXPECT_EQ(set.clients.at(0).connections, 2u);
    EXPECT_EQ(c.tenantShare(), kDefaultMaxConnections / 2) << "one rule, and one share for root and the rest";
    EXPECT_EQ(set.tenantShare(), 1u) << "3 / 2, rounded down";
    EXPECT_EQ(parseConfig(R"({"ifaces":["e"],"max_connections":1})").tenantShare(), 1u) << "at least 1";

    EXPECT_EQ(parseConfig(R"({"ifaces":["e"],"socket_group":1234})").socketGroup, "1234");
    EXPECT_EQ(parseConfig(R"({"ifaces":["e"],"socket_group":null})").socketGroup, "");
    EXPECT_FALSE(parseConfig(R"({"ifaces":["e"],"allow_root":false})").allowRoot);
}

TEST(Config, MistakesNameTheKey)
{
    const std::string rule = R"("uid": 1000, "ports": ["9000"])";
    auto client = [&](const std::string& extra) {
        return R"({"ifaces":["eth0"],"clients":[{)" + rule + extra + "}]}";
    };
    struct Case {
        std::string text;
        std::string error; // what() must contain this
    };
    const Case cases[] = {
        {"", "test.json: not valid JSON: parse error at line 1, column 1"},
        {"{\n  \"ifaces\": [\"eth0\"],\n  oops\n}", "test.json: not valid JSON: parse error at line 3"},
        {R"(["eth0"])", "test.json: must be a JSON object, got an array"},
        {R"({"ifaces":["eth0"],"sockt":"/run/x.sock"})", "test.json: sockt: unknown key"},
        {R"({"ifaces":["eth0"],"ifaces":["eth1"]})", "test.json: ifaces: duplicate key"},
        {R"({"socket":"/run/x.sock"})", "test.json: ifaces: missing"},
        {R"({"ifaces":[]})", "test.json: ifaces: must be an array of 1..64"},
        {R"({"ifaces":["e"],"clients":[{"pod": "tenant-a", "ports": ["1"]}]})",
         "test.json: clients[0].pod: \"tenant-a\" must be NAMESPACE/NAME (either may be *)"},
        {R"({"ifaces":["e"],"clients":[{"pod": "Tenant/x", "ports": ["1"]}]})",
         "test.json: clients[0].pod: \"Tenant\" is not a Kubernetes namespace (a DNS label) or *"},
        {R"({"ifaces":["e"],"clients":[{"pod": "a/x_y", "ports": ["1"]}]})",
         "test.json: clients[0].pod: \"x_y\" is not a pod name (a DNS subdomain) or *"},
        {R"({"ifaces":["e"],"clients":[{"pod": null, "ports": ["1"]}]})", "matches nobody: give at least one of"},
        {R"({"ifaces":["e"],"pods_socket":"run/pods.sock"})", "test.json: pods_socket: \"run/pods.sock\" must be an absolute path"},
        {R"({"ifaces":["e"],"pods_socket":"/run/npf/npfd.sock"})",
         "test.json: pods_socket: \"/run/npf/npfd.sock\" is the clients' socket too"},
        {R"({"ifaces":"eth0"})", "test.json: ifaces: must be an array"},
        {R"({"ifaces":["eth0","eth0"]})", "test.json: ifaces[1]: \"eth0\" is listed twice"},
        {R"({"ifaces":["a/b"]})", "test.json: ifaces[0]: \"a/b\" is not an interface name"},
        {R"({"ifaces":["sixteen-chars-xx"]})", "ifaces[0]"},
        {R"({"ifaces":[":eth0"]})", "test.json: ifaces[0]: \":eth0\": the network namespace must be a name"},
        {R"({"ifaces":["a/b:eth0"]})", "test.json: ifaces[0]: \"a/b:eth0\": the network namespace must be"},
        {R"({"ifaces":["..:eth0"]})", "ifaces[0]: \"..:eth0\": the network namespace must be"},
        {R"({"ifaces":["pod-a:"]})", "test.json: ifaces[0]: \"pod-a:\": \"\" is not an interface name"},
        {R"({"ifaces":["pod-a:a/b"]})", "ifaces[0]: \"pod-a:a/b\": \"a/b\" is not an interface name"},
        {R"({"ifaces":[7]})", "test.json: ifaces[0]: must be a string, got 7"},
        {R"({"ifaces":["e"],"socket":"run/npfd.sock"})", "test.json: socket: \"run/npfd.sock\" must be an absolute path"},
        {R"({"ifaces":["e"],"socket":"/)" + std::string(120, 's') + "\"}", "test.json: socket: longer than 107 bytes"},
        {R"({"ifaces":["e"],"spill_dir":""})", "test.json: spill_dir: \"\" must be an absolute path"},
        {R"({"ifaces":["e"],"socket_group":-1})", "test.json: socket_group: must be a group name or a gid"},
        {R"({"ifaces":["e"],"socket_group":"a b"})", "test.json: socket_group"},
        {R"({"ifaces":["e"],"allow_root":"yes"})", "test.json: allow_root: must be true or false"},
        {R"({"ifaces":["e"],"clients":{}})", "test.json: clients: must be an array"},
        {R"({"ifaces":["e"],"clients":[5]})", "test.json: clients[0]: must be an object"},
        {R"({"ifaces":["e"],"clients":[{"ports":["9000"]}]})", "test.json: clients[0]: matches nobody"},
        {R"({"ifaces":["e"],"clients":[{"uid":null,"gid":null,"cgroup":null,"ports":["9000"]}]})",
         "clients[0]: matches nobody"},
        {R"({"ifaces":["e"],"clients":[{"uid":1}]})", "test.json: clients[0].ports: missing"},
        {client(R"(,"prots":["1"])"), "test.json: clients[0].prots: unknown key"},
        {client(R"(,"uid":2)"), "test.json: clients[0].uid: duplicate key"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":[]}]})", "clients[0].ports: must be a non-empty array"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":["9100-9000"]}]})",
         "test.json: clients[0].ports[0]: \"9100-9000\": first port above last"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":["1","0"]}]})", "clients[0].ports[1]: \"0\": port 0"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":["0-10"]}]})", "clients[0].ports[0]: \"0-10\": port 0"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":[0]}]})", "clients[0].ports[0]: 0 is out of range 1..65535"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":["70000"]}]})", "clients[0].ports[0]: \"70000\": not a port"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":[70000]}]})",
         "clients[0].ports[0]: 70000 is out of range 1..65535"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":["9000-"]}]})", "clients[0].ports[0]: \"9000-\": not a port"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":[" 90"]}]})", "clients[0].ports[0]"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":["+90"]}]})", "clients[0].ports[0]"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":[-90]}]})", "clients[0].ports[0]"},
        {R"({"ifaces":["e"],"clients":[{"uid":1,"ports":[9000.0]}]})", "clients[0].ports[0]"},
        {R"({"ifaces":["e"],"clients":[{"uid":-1,"ports":[1]}]})", "clients[0].uid: must be an unsigned integer"},
        {R"({"ifaces":["e"],"clients":[{"uid":4294967295,"ports":[1]}]})", "clients[0].uid: 4294967295 is out of range"},
        {R"({"ifaces":["e"],"clients":[{"gid":"npf","ports":[1]}]})", "clients[0].gid: must be an unsigned integer"},
        {R"({"ifaces":["e"],"clients":[{"cgroup":"app.slice","ports":[1]}]})", "clients[0].cgroup: \"app.slice\""},
        {client(R"(,"addr":"10.0.0")"), "clients[0].addr: \"10.0.0\" is not an IPv4 or IPv6 address"},
        {client(R"(,"region_bytes":1000000)"), "clients[0].region_bytes: 1000000 is not a multiple of 4096"},
        {client(R"(,"region_bytes":0)"), "clients[0].region_bytes: 0 is out of range"},
        {client(R"(,"region_bytes":1e9)"), "clients[0].region_bytes: must be an unsigned integer"},
        {client(R"(,"region_bytes":8192,"resident_bytes":16384)"),
         "clients[0].resident_bytes: resident_bytes 16384 is above region_bytes 8192"},
        {client(R"(,"region_bytes":8192)"), "clients[0].region_bytes: resident_bytes 268435456 is above"},
        {client(R"(,"flows":0)"), "clients[0].flows: 0 is out of range"},
        {client(R"(,"flows":1.5)"), "clients[0].flows: must be an unsigned integer"},
        {client(R"(,"connections":0)"), "clients[0].connections: 0 is out of range"},
        {client(R"(,"connections":65537)"), "clients[0].connections: 65537 is out of range"},
        {R"({"ifaces":["e"],"max_connections":0})", "test.json: max_connections: 0 is out of range"},
        {R"({"ifaces":["e"],"max_connections":"many"})", "test.json: max_connections: must be an unsigned integer"},
        {R"({"ifaces":["e"],"hello_timeout_ms":99})", "test.json: hello_timeout_ms: 99 is out of range"},
        {R"({"ifaces":["e"],"hello_timeout_ms":600001})", "test.json: hello_timeout_ms: 600001 is out of range"},
        {R"({"ifaces":["e"],"delegate":["f"]})", "test.json: delegate[0]: \"f\" is not one of \"ifaces\""},
        {R"({"ifaces":["e"],"delegate":["e","e"]})", "test.json: delegate[1]: \"e\" is listed twice"},
        {R"({"ifaces":["e"],"delegate":"e"})", "test.json: delegate: must be an array"},
    };
    for (const Case& c : cases) {
        std::string e = errorOf(c.text);
        EXPECT_NE(e.find(c.error), std::string::npos) << c.text << "\n  -> " << e;
        EXPECT_EQ(e.rfind("test.json: ", 0), 0u) << e;
    }
}

// "delegate" names interfaces of "ifaces" as written there.
TEST(Config, DelegatedInterfaces)
{
    const DaemonConfig c = parseConfig(R"({"ifaces":["eth0","pod-a:eth0"],"delegate":["pod-a:eth0"]})", "test.json");
    EXPECT_TRUE(c.delegated("pod-a:eth0"));
    EXPECT_FALSE(c.delegated("eth0"));
    EXPECT_FALSE(parseConfig(R"({"ifaces":["eth0"]})", "test.json").delegated("eth0"));
}

TEST(Config, RulesMatchInOrder)
{
    DaemonConfig c = parseConfig(R"({"ifaces":["e"], "clients":[
        {"uid": 1000, "gid": 1000, "ports": ["1000"]},
        {"uid": 1000, "ports": ["1001"]},
        {"gid": 100, "ports": ["1002"]},
        {"cgroup": "/app.slice/rx.service/", "ports": ["1003"]},
        {"cgroup": "/", "uid": 2000, "ports": ["1004"]},
        {"gid": 0, "ports": ["1005"]}
    ]})");
    auto port = [&](uid_t u, gid_t g, std::string_view cg) -> int {
        const ClientRule* r = c.match(u, g, cg);
        return r ? r->ports.at(0).first : -1;
    };
    EXPECT_EQ(port(1000, 1000, ""), 1000);          // uid and gid
    EXPECT_EQ(port(1000, 100, ""), 1001);           // uid alone: the first rule needs both
    EXPECT_EQ(port(7, 100, ""), 1002);              // gid
    EXPECT_EQ(port(7, 7, "/app.slice/rx.service"), 1003);
    EXPECT_EQ(port(7, 7, "/app.slice/rx.service/worker"), 1003);
    EXPECT_EQ(port(7, 7, "/app.slice/rx.service2"), -1); // whole components only
    EXPECT_EQ(port(7, 7, "/app.slice"), -1);
    EXPECT_EQ(port(7, 7, ""), -1);                  // cgroup unknown: no cgroup rule matches
    EXPECT_EQ(port(2000, 7, "/anything"), 1004);
    EXPECT_EQ(port(2000, 7, ""), -1);
    EXPECT_EQ(port(0, 0, ""), 1005);                // a rule that matches root wins over the fallback
}

TEST(Config, PodRulesMatchOnlyClientsOfPodsListeners)
{
    DaemonConfig c = parseConfig(R"({"ifaces":["e"], "pods_socket": "/run/npf/pods.sock", "clients":[
        {"pod": "tenant-a/web-0", "ports": ["1000"]},
        {"pod": "tenant-a/*", "uid": 65534, "ports": ["1001"]},
        {"pod": "*/*", "ports": ["1002"]},
        {"uid": 65534, "ports": ["1003"]}
    ]})");
    EXPECT_EQ(c.podsSocket, "/run/npf/pods.sock");
    auto port = [&](uid_t u, const PodName* pod) -> int {
        const ClientRule* r = c.match(u, u, "", pod);
        return r ? r->ports.at(0).first : -1;
    };
    const PodName web0{"tenant-a", "web-0"}, web1{"tenant-a", "web-1"}, db{"tenant-b", "db-0"};
    EXPECT_EQ(port(0, &web0), 1000);
    EXPECT_EQ(port(65534, &web1), 1001);
    EXPECT_EQ(port(0, &web1), 1002);   // the uid did not match the second rule
    EXPECT_EQ(port(65534, &db), 1002);
    EXPECT_EQ(port(65534, nullptr), 1003); // npfd's socket: no pod rule applies
    EXPECT_EQ(port(1, nullptr), -1);
    // Root through a pod's listener gets no catch-all.
    DaemonConfig none = parseConfig(R"({"ifaces":["e"], "clients":[{"pod": "tenant-a/*", "ports": ["1"]}]})");
    EXPECT_EQ(none.match(0, 0, "", &db), nullptr);
    EXPECT_NE(none.match(0, 0, "", nullptr), nullptr);
    EXPECT_TRUE(none.podsSocket.empty());
}

TEST(Config, RootFallback)
{
    DaemonConfig c = parseConfig(R"({"ifaces":["e"], "clients":[{"uid": 1000, "ports": ["9000"]}]})");
    const ClientRule* root = c.match(0, 0, "/");
    ASSERT_NE(root, nullptr);
    EXPECT_TRUE(root->allowsPort(1));
    EXPECT_TRUE(root->allowsPort(65535));
    EXPECT_TRUE(root->allowsAddr(""));
    EXPECT_TRUE(root->allowsAddr("10.1.2.3"));
    EXPECT_EQ(root->regionBytes, std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(root->flows, std::numeric_limits<uint32_t>::max());
    EXPECT_EQ(c.match(1, 0, "/"), nullptr); // gid 0 alone is not root

    c.allowRoot = false;
    EXPECT_EQ(c.match(0, 0, "/"), nullptr);
    EXPECT_EQ(parseConfig(R"({"ifaces":["e"],"allow_root":false})").match(0, 0, ""), nullptr);
}

TEST(Config, PortsAndAddresses)
{
    DaemonConfig c = parseConfig(R"({"ifaces":["e"], "clients":[
        {"uid": 1, "ports": ["9000-9099", 5000, "1-1", "65535"], "addr": "10.0.0.1"},
        {"uid": 2, "ports": ["1-65535"], "addr": "fe80::1"},
        {"uid": 3, "ports": [1], "addr": ""}
    ]})");
    const ClientRule& a = c.clients[0];
    for (uint16_t p : {9000, 9050, 9099, 5000, 1, 65535})
        EXPECT_TRUE(a.allowsPort(p)) << p;
    for (uint16_t p : {8999, 9100, 4999, 5001, 2, 65534, 0})
        EXPECT_FALSE(a.allowsPort(p)) << p;
    EXPECT_TRUE(a.allowsAddr("10.0.0.1"));
    EXPECT_FALSE(a.allowsAddr("10.0.0.2"));
    EXPECT_FALSE(a.allowsAddr(""));   // a prescribed address excludes the wildcard
    EXPECT_FALSE(a.allowsAddr("::ffff:10.0.0.1"));
    EXPECT_FALSE(a.allowsAddr("junk"));

    const ClientRule& b = c.clients[1];
    EXPECT_TRUE(b.allowsAddr("fe80::1"));
    EXPECT_TRUE(b.allowsAddr("FE80:0:0::1")); // compared as addresses
    EXPECT_FALSE(b.allowsAddr("fe80::2"));

    const ClientRule& any = c.clients[2];
    EXPECT_TRUE(any.allowsAddr(""));
    EXPECT_TRUE(any.allowsAddr("192.168.1.1"));
    EXPECT_TRUE(any.allowsAddr("::1"));
}

TEST(Config, LoadNamesTheFile)
{
    TempDir dir;
    const std::string path = dir / "npfd.json";
    int err = 0;
    std::string what;
    try {
        loadConfig(path);
    } catch (const std::system_error& e) {
        err = e.code().value();
        what = e.what();
    }
    EXPECT_EQ(err, ENOENT);
    EXPECT_NE(what.find(path), std::string::npos) << what;

    std::ofstream(path) << R"({"ifaces": ["eth0"], "clients": [{"uid": 5, "ports": ["9100-9000"]}]})";
    what.clear();
    try {
        loadConfig(path);
    } catch (const std::system_error& e) {
        what = e.what();
    }
    EXPECT_EQ(what, path + ": clients[0].ports[0]: \"9100-9000\": first port above last");

    std::ofstream(path) << kExample;
    EXPECT_EQ(loadConfig(path).clients.size(), 1u);
}

} // namespace
} // namespace npf::test
