// The two Kubernetes modes of deploy/k8s/ without a cluster (root):
//
// - pod model (sidecar-pod.yaml): a pod is a network namespace with its
//   `eth0` plus its own mount of the socket directory (an emptyDir at
//   /run/npf, here a tmpfs in a mount namespace of the pod's); npfd and two
//   unprivileged clients (uid 65534) run in it, with npfd's default socket
//   path, and each client receives its stream byte for byte.
// - node model (daemonset.yaml): one npfd in the host's network namespace
//   serves two pods' `eth0`s (two namespaces, two veth pairs), entering each
//   pod's namespace to attach; a client in each pod names "eth0", gets its
//   own pod's, and both use the same port at once.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_fixture.h"
#include "ipc/channel.h"
#include "npf/client.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

class NpfdPods : public EngineE2E {};

// A pod's own mount of /run/npf: a persistent mount namespace (unshare
// --mount=FILE, FILE on a private bind mount of `dir`) with a tmpfs over
// /run/npf that nothing outside it sees. Processes join it with nsenter.
class PodMounts {
public:
    explicit PodMounts(const std::string& dir) : mnt_(dir + "/pod-mnt"), ns_(mnt_ + "/ns")
    {
        const std::string cmd = "mkdir -p " + mnt_ + " && mount --bind " + mnt_ + " " + mnt_ +
                                " && mount --make-private " + mnt_ + " && touch " + ns_ + " && unshare --mount=" +
                                ns_ +
                                " --propagation private sh -c 'mkdir -p /run/npf && "
                                "mount -t tmpfs -o mode=0755,size=4m npf-pod /run/npf'";
        if (test::sh(cmd) != 0)
            throw std::runtime_error("failed: " + cmd);
    }
    ~PodMounts() { (void)test::sh("umount " + ns_ + " 2>/dev/null; umount -l " + mnt_ + " 2>/dev/null"); }
    PodMounts(const PodMounts&) = delete;
    PodMounts& operator=(const PodMounts&) = delete;

    // argv run in the pod's mount namespace.
    std::vector<std::string> wrap(std::vector<std::string> argv) const
    {
        argv.insert(argv.begin(), {"nsenter", "--mount=" + ns_});
        return argv;
    }
    std::string shell() const { return "nsenter --mount=" + ns_ + " "; }

private:
    std::string mnt_, ns_;
};

std::string clientRules()
{
    return R"("clients": [{"uid": 65534, "ports": ["7400-7499"], "region_bytes": 536870912,
                          "resident_bytes": 268435456, "flows": 4}])";
}

// npf-recv --connect as uid 65534: `prefix` (namespace entry) + the command.
std::vector<std::string> clientArgv(const std::string& socket, uint16_t port, const std::string& out, size_t bytes,
                                    std::vector<std::string> extra)
{
    std::vector<std::string> a = {"setpriv",     "--reuid=65534", "--regid=65534", "--clear-groups", NPF_RECV_PATH,
                                  "eth0",        std::to_string(port),
                                  "--connect"};
    if (!socket.empty())
        a.push_back(socket);
    a.insert(a.end(), {"-o", out, "-n", std::to_string(bytes / 1024), "--idle", "3"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// Sends each stream from its pod's tx side at once; every client exits 0 with
// its stream byte for byte in its output file.
struct Stream {
    Rig* rig;
    uint16_t port;
    std::string in, out, err;
    Child* client;
};

void expectByteForByte(std::vector<Stream>& streams)
{
    std::vector<int> sent(streams.size(), -1);
    std::vector<std::thread> senders;
    for (size_t i = 0; i < streams.size(); i++)
        senders.emplace_back([&, i] { sent[i] = socatSend(*streams[i].rig, streams[i].in, streams[i].port); });
    for (auto& t : senders)
        t.join();
    for (size_t i = 0; i < streams.size(); i++) {
        const Stream& s = streams[i];
        EXPECT_EQ(sent[i], 0) << "socat to port " << s.port;
        int st = -1;
        ASSERT_TRUE(s.client->wait(int(test::kDeadline.count()), &st)) << readFile(s.err);
        EXPECT_EQ(st, 0) << readFile(s.err);
        EXPECT_TRUE(readFile(s.out) == readFile(s.in)) << s.out << " differs from its stream " << s.in;
    }
}

bool attached(Rig& rig)
{
    const std::string st = rig.statusJson();
    return !st.empty() && nlohmann::json::parse(st)["state"] == "attached";
}

TEST_F(NpfdPods, PodModelNpfdAndTwoUnprivilegedClientsShareThePodsSocketDirectory)
{
    Rig rig({.rxName = "eth0"}); // the pod's network namespace and its eth0
    TempDir dir;
    ::chmod(dir.path.c_str(), 0777);
    PodMounts pod(dir.path);
    const std::string config = dir.path + "/npfd.json";
    // The default socket, /run/npf/npfd.sock: the pod's emptyDir.
    std::ofstream(config) << R"({"ifaces": ["eth0"], "socket_group": "nogroup", )" << clientRules() << "}";
    Child npfd(rig.veth().rxNs().path(), pod.wrap({NPFD_PATH, "-c", config}), dir.path + "/npfd.log", true);
    ASSERT_TRUE(npfd.ready()) << readFile(dir.path + "/npfd.log");

    // The socket is in the pod's /run/npf and nowhere else: the host's
    // /run/npf has no such file, or another one.
    const std::string inPod = test::shOut(rig.veth().rxNs().exec() + pod.shell() + "stat -c %d:%i /run/npf/npfd.sock");
    ASSERT_FALSE(inPod.empty()) << "no socket in the pod's /run/npf";
    EXPECT_NE(test::shOut("stat -c %d:%i /run/npf/npfd.sock 2>/dev/null"), inPod);

    const size_t size = 2 << 20;
    const uint16_t warm = kFirstPort + 1, cold = kFirstPort + 2;
    writeStream(dir.path + "/a.in", size, 11);
    writeStream(dir.path + "/b.in", size, 12);
    Child a(rig.veth().rxNs().path(), pod.wrap(clientArgv("", warm, dir.path + "/a.out", size, {})),
            dir.path + "/a.err", true);
    Child b(rig.veth().rxNs().path(),
            pod.wrap(clientArgv("", cold, dir.path + "/b.out", size, {"--cold", "--region", "16M", "--budget", "2M"})),
            dir.path + "/b.err", true);
    ASSERT_TRUE(a.ready());
    ASSERT_TRUE(b.ready());
    std::vector<Stream> streams = {{&rig, warm, dir.path + "/a.in", dir.path + "/a.out", dir.path + "/a.err", &a},
                                   {&rig, cold, dir.path + "/b.in", dir.path + "/b.out", dir.path + "/b.err", &b}};
    expectByteForByte(streams);

    // npfctl in the pod reads npfd's numbers (its stats file, rewritten every
    // 500 ms, is in the pod's /run/npf).
    std::string stats;
    uint64_t ok = 0;
    EXPECT_TRUE(test::waitUntil([&] {
        stats = test::shOut(rig.veth().rxNs().exec() + pod.shell() + NPFCTL_PATH + " stats eth0 --json 2>&1");
        const auto j = nlohmann::json::parse(stats, nullptr, false);
        if (!j.is_discarded() && j.contains("counters") && j["counters"].contains("engine"))
            ok = j["counters"]["engine"].value("completed_ok", uint64_t{0});
        return ok >= 2 * size / 1024;
    })) << "npfctl stats in the pod: completed_ok " << ok << "\n" << stats;

    npfd.kill(SIGTERM);
    int st = -1;
    ASSERT_TRUE(npfd.wait(int(test::kDeadline.count()), &st));
    EXPECT_EQ(st, 0) << readFile(dir.path + "/npfd.log");
    EXPECT_FALSE(attached(rig)) << "npfd left the program it attached";
}

TEST_F(NpfdPods, NodeModelOneNpfdInTheHostNamespaceServesTwoPods)
{
    Rig podA({.rxName = "eth0"}), podB({.rxName = "eth0"});
    TempDir dir;
    ::chmod(dir.path.c_str(), 0777);
    const std::string config = dir.path + "/npfd.json", socket = dir.path + "/npfd.sock"; // the node's /run/npf
    // One pod named as `ip netns` knows it, the other by path (/proc/PID/ns/net works the same).
    std::ofstream(config) << R"({"ifaces": [")" << podA.veth().rxNs().name() << R"(:eth0", ")"
                          << podB.veth().rxNs().path() << R"(:eth0"], "socket": ")" << socket
                          << R"(", "socket_group": "nogroup", )" << clientRules() << "}";
    // nsenter resolves /proc/self in itself: the test's (the host's) namespace.
    Child npfd("/proc/self/ns/net", {NPFD_PATH, "-c", config}, dir.path + "/npfd.log", true);
    ASSERT_TRUE(npfd.ready()) << readFile(dir.path + "/npfd.log");
    EXPECT_TRUE(attached(podA));
    EXPECT_TRUE(attached(podB));

    // A client in the host's namespace names "eth0": npfd serves none there.
    {
        Client cli({.socket = socket, .regionSize = 1 << 20, .name = "host"});
        try {
            (void)cli.openFlow(kFirstPort, "", "eth0");
            ADD_FAILURE() << "a client outside the pods got a pod's eth0";
        } catch (const ipc::RemoteError& e) {
            EXPECT_EQ(e.code(), ipc::ErrorCode::NotAllowed) << e.what();
            EXPECT_EQ(e.err(), ENODEV) << e.what();
        }
    }

    // Both pods' clients on the same port: each pod's eth0 is its own.
    const size_t size = 2 << 20;
    const uint16_t port = kFirstPort;
    writeStream(dir.path + "/a.in", size, 21);
    writeStream(dir.path + "/b.in", size, 22);
    Child a(podA.veth().rxNs().path(), clientArgv(socket, port, dir.path + "/a.out", size, {}), dir.path + "/a.err",
            true);
    Child b(podB.veth().rxNs().path(),
            clientArgv(socket, port, dir.path + "/b.out", size, {"--cold", "--region", "16M", "--budget", "2M"}),
            dir.path + "/b.err", true);
    ASSERT_TRUE(a.ready());
    ASSERT_TRUE(b.ready());
    std::vector<Stream> streams = {{&podA, port, dir.path + "/a.in", dir.path + "/a.out", dir.path + "/a.err", &a},
                                   {&podB, port, dir.path + "/b.in", dir.path + "/b.out", dir.path + "/b.err", &b}};
    expectByteForByte(streams);

    npfd.kill(SIGTERM);
    int st = -1;
    ASSERT_TRUE(npfd.wait(int(test::kDeadline.count()), &st));
    EXPECT_EQ(st, 0) << readFile(dir.path + "/npfd.log");
    EXPECT_FALSE(attached(podA)) << "npfd left the program it attached in pod A";
    EXPECT_FALSE(attached(podB)) << "npfd left the program it attached in pod B";
}

} // namespace
} // namespace npf::e2e
