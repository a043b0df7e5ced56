// npf-cni with npfd, in real network namespaces (root): the tenancy of
// deploy/k8s/README.md without a cluster. npfd serves the rig's interface as
// a DaemonSet's npfd serves the node's NIC, with a pods socket; each "pod" is
// a network namespace of its own, and npf-cni is run as the container
// runtime runs a chained CNI plugin (CNI_* environment, the network
// configuration with prevResult on stdin).
//
// - a pod's client reaches npfd through its own "@npf" only, is admitted by a
//   "pod" rule whatever its uid (root included: no catch-all for pods), opens
//   flows only on its pod's own address ("any" is that address) and receives
//   byte for byte; another
//   pod cannot reach that listener nor take that address; DEL disconnects the
//   pod's clients and withdraws their flows;
// - npfd restarted: `npf-cni watch` hands every recorded pod over again, the
//   ones added while npfd was down included;
// - the pods socket refuses what is not root's and what is not a pod's
//   listener.
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine_fixture.h"
#include "ipc/channel.h"
#include "ipc/pods.h"
#include "ipc/unix_socket.h"
#include "netns.h"
#include "npf/client.h"
#include "npfd_rig.h"
#include "wait.h"

namespace npf::e2e {
namespace {

class NpfdCni : public EngineE2E {};

const char* kPodRules = R"([{"pod": "tenant-a/*", "ports": ["7400-7499"], "region_bytes": 67108864,
                             "resident_bytes": 33554432, "flows": 2}])";

struct Pod {
    std::string container, ns, name, addr;
    const test::Netns& netns;
};

// npf-cni as a runtime runs it; its stdout, *status its exit status.
std::string cni(const TempDir& dir, const std::string& command, const Pod& p, int* status)
{
    const std::string config = dir.path + "/cni-" + p.container + ".json";
    std::ofstream(config) << R"({"cniVersion": "1.0.0", "name": "pods", "type": "npf-cni", "socket": ")" << dir.path
                          << R"(/pods.sock", "state_dir": ")" << dir.path
                          << R"(/cni", "prevResult": {"cniVersion": "1.0.0", "ips": [{"address": ")" << p.addr
                          << R"(/30", "interface": 0}]}})";
    return test::shOut("env -i CNI_COMMAND=" + command + " CNI_CONTAINERID=" + p.container +
                           " CNI_NETNS=" + p.netns.path() + " CNI_IFNAME=eth0 CNI_PATH=/opt/cni/bin" +
                           " 'CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=" + p.ns + ";K8S_POD_NAME=" + p.name +
                           ";K8S_POD_UID=uid-" + p.container + "' " NPF_CNI_PATH " < " + config + " 2>>" +
                           dir.path + "/cni.log",
                       status);
}

::testing::AssertionResult cniOk(const TempDir& dir, const std::string& command, const Pod& p)
{
    int status = -1;
    const std::string out = cni(dir, command, p, &status);
    if (status != 0)
        return ::testing::AssertionFailure() << "npf-cni " << command << " exited " << status << ": " << out
                                             << readFile(dir.path + "/cni.log");
    return ::testing::AssertionSuccess() << out;
}

NpfdOptions podsNpfd(const TempDir& dir)
{
    return {.settings = R"("pods_socket": ")" + dir.path + R"(/pods.sock")", .clients = kPodRules};
}

// A client of npfd through the pod's "@npf" (the thread enters the pod's
// network namespace to connect; the connection is the pod's from then on).
std::unique_ptr<Client> podClient(const Pod& p, const std::string& name)
{
    test::NetnsGuard in(p.netns);
    return std::make_unique<Client>(
        ClientConfig{.socket = ipc::kPodSocket, .regionSize = 4 << 20, .residentBudget = 2 << 20, .name = name});
}

// Why a client of the pod is not served ("" if it is).
std::string podRefused(const Pod& p)
{
    try {
        (void)podClient(p, "refused");
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

bool disconnected(Client& c)
{
    try {
        (void)c.stats();
        return false;
    } catch (const std::exception&) {
        return true;
    }
}

// The address of the flow on `port` in `npfctl flow list --json` ("" for
// any address, "-" when there is no such flow).
std::string flowAddr(Rig& rig, uint16_t port)
{
    const nlohmann::json j = nlohmann::json::parse(rig.npfctl("flow list --json " + rig.rxIf()), nullptr, false);
    if (!j.is_discarded() && j.contains("flows"))
        for (const auto& f : j["flows"])
            if (f.value("port", 0) == port)
                return f["addr"].is_string() ? f["addr"].get<std::string>() : std::string();
    return "-";
}

bool flowListed(Rig& rig, uint16_t port) { return flowAddr(rig, port) != "-"; }

// 16 datagrams into the flow, byte for byte.
void receives(Rig& rig, Client& cli, Flow& f, uint16_t port, uint32_t sender)
{
    constexpr uint32_t kN = 16, kSize = 900;
    for (uint32_t i = 0; i < kN; i++)
        ASSERT_TRUE(f.post(i * 2048, 2048));
    f.flush();
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = sender, .count = kN, .dstPort = port,
                                         .size = [](uint32_t) { return kSize; }}),
              "");
    npf_completion c[kN];
    ASSERT_EQ(awaitCompletions(f, c), kN);
    for (uint32_t i = 0; i < kN; i++) {
        ASSERT_EQ(c[i].status, NPF_CS_OK);
        const std::vector<uint8_t> want = payloadFor(senderId(sender, i), kSize);
        ASSERT_EQ(std::memcmp(cli.region() + c[i].offset, want.data(), kSize), 0) << "datagram " << i;
    }
}

TEST_F(NpfdCni, APodsClientsReachNpfdThroughTheirListenerAndUseOnlyTheirPodsAddress)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, podsNpfd(dir));
    const test::Netns nsA("npfpa"), nsB("npfpb"), nsC("npfpc");
    // A's address is the one the rig's traffic goes to (a pod IP routed to the node's NIC).
    const Pod a{"c0ffee01", "tenant-a", "web-0", rig.rxAddr(), nsA};
    const Pod b{"c0ffee02", "tenant-a", "web-1", "198.19.7.2", nsB};
    const Pod c{"c0ffee03", "tenant-b", "db-0", "198.19.7.6", nsC};
    for (const Pod* p : {&a, &b, &c}) {
        const auto r = cniOk(dir, "ADD", *p);
        ASSERT_TRUE(r);
        // A chained plugin passes the previous result on.
        const auto out = nlohmann::json::parse(r.message());
        EXPECT_EQ(out["ips"][0]["address"], p->addr + "/30") << r.message();
    }
    EXPECT_TRUE(cniOk(dir, "CHECK", a));

    // A's client runs as root, which npfd's socket would admit for anything
    // (allow_root): through a pod's listener only the pod's rule counts.
    std::unique_ptr<Client> cliA = podClient(a, "a");
    const uint16_t port = kFirstPort + 1;
    try {
        (void)cliA->openFlow(port + 1, b.addr);
        ADD_FAILURE() << "a pod took another pod's address";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("its pod's own addresses (" + a.addr + ")"), std::string::npos)
            << e.what();
    }
    // "Any address" is the pod's own: the flow is bound to it.
    Flow& fa = cliA->openFlow(port);
    EXPECT_EQ(flowAddr(rig, port), a.addr);
    receives(rig, *cliA, fa, port, 1);

    // B (the same tenant) cannot take A's address; C's namespace has no rule.
    std::unique_ptr<Client> cliB = podClient(b, "b");
    EXPECT_THROW((void)cliB->openFlow(port + 1, a.addr), std::exception);
    EXPECT_NE(podRefused(c).find("matches no client rule"), std::string::npos) << podRefused(c);
    // Nothing listens on "@npf" where npfd runs (nor anywhere npf-cni did not bind it).
    {
        test::NetnsGuard node(rig.veth().rxNs());
        try {
            (void)ipc::connectSocket(ipc::kPodSocket);
            ADD_FAILURE() << "@npf answered in npfd's own namespace";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code().value(), ECONNREFUSED) << e.what();
        }
    }

    // DEL: A's client is disconnected, its flow withdrawn, its listener gone.
    ASSERT_TRUE(flowListed(rig, port));
    ASSERT_TRUE(cniOk(dir, "DEL", a));
    EXPECT_TRUE(test::waitUntil([&] { return disconnected(*cliA); })) << npfd.log();
    EXPECT_TRUE(test::waitUntil([&] { return !flowListed(rig, port); }));
    EXPECT_NE(podRefused(a).find("nothing listens on @npf"), std::string::npos) << podRefused(a);
    EXPECT_FALSE(std::filesystem::exists(dir.path + "/cni/" + a.container + ".json"));
    EXPECT_FALSE(disconnected(*cliB)) << "B lost its connection with A's pod";
    EXPECT_TRUE(cniOk(dir, "DEL", a)) << "a second DEL must succeed (CNI)";
    for (const Pod* p : {&b, &c})
        EXPECT_TRUE(cniOk(dir, "DEL", *p));
}

TEST_F(NpfdCni, WatchHandsEveryRecordedPodOverWhenNpfdRestarts)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, podsNpfd(dir));
    const test::Netns nsA("npfpa"), nsB("npfpb");
    const Pod a{"feed0001", "tenant-a", "web-0", rig.rxAddr(), nsA};
    const Pod b{"feed0002", "tenant-a", "web-1", "198.19.7.2", nsB};
    ASSERT_TRUE(cniOk(dir, "ADD", a));
    Child watch("/proc/" + std::to_string(::getpid()) + "/ns/net",
                {NPF_CNI_PATH, "--socket", dir.path + "/pods.sock", "--state-dir", dir.path + "/cni", "watch",
                 "--retry-ms", "50"},
                dir.path + "/watch.log");
    ASSERT_EQ(npfd.stop(), 0);
    EXPECT_NE(podRefused(a), "") << "the listener outlived npfd";
    // A pod created while npfd is down starts (ADD succeeds), and is recorded.
    ASSERT_TRUE(cniOk(dir, "ADD", b));
    npfd.start();
    for (const Pod* p : {&a, &b})
        EXPECT_TRUE(test::waitUntil([&] { return podRefused(*p).empty(); }))
            << p->name << ": " << podRefused(*p) << "\n" << readFile(dir.path + "/watch.log");
    std::unique_ptr<Client> cli = podClient(a, "a");
    const uint16_t port = kFirstPort + 2;
    Flow& f = cli->openFlow(port, a.addr);
    receives(rig, *cli, f, port, 2);
    EXPECT_TRUE(watch.running()) << readFile(dir.path + "/watch.log");
}

TEST_F(NpfdCni, ThePodsSocketTakesOnlyRootsRequestsAndOnlyAPodsListener)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, podsNpfd(dir));
    const std::string socket = dir.path + "/pods.sock";
    struct stat st{};
    ASSERT_EQ(::stat(socket.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    int status = 0;
    const std::string out = test::shOut("setpriv --reuid=65534 --regid=65534 --clear-groups " NPF_CNI_PATH
                                        " --socket " + socket + " --state-dir " + dir.path + "/cni restore 2>&1",
                                        &status);
    EXPECT_EQ(status, 3) << out; // permission
    EXPECT_NE(out.find("no permission"), std::string::npos) << out;

    ipc::Channel ch = ipc::Channel::connect(socket);
    const ipc::PodInfo pod{"bad01", "tenant-a", "web-0", "", {rig.rxAddr()}};
    auto refusal = [&](const nlohmann::ordered_json& req, std::span<const int> fds) -> std::string {
        try {
            (void)ch.request(req, fds);
        } catch (const ipc::RemoteError& e) {
            return std::string(ipc::toString(e.code())) + ": " + e.message();
        }
        return "accepted";
    };
    auto addReq = [](const ipc::PodInfo& p) { return nlohmann::ordered_json::parse(ipc::PodAddRequest{p}.encode(0)); };
    EXPECT_EQ(refusal(addReq(pod), {}).rfind("bad_fd", 0), 0u);
    const Fd efd(::eventfd(0, EFD_CLOEXEC));
    const int notListener[] = {efd.get()};
    EXPECT_EQ(refusal(addReq(pod), notListener).rfind("bad_fd", 0), 0u);
    {
        // A listener in npfd's own namespace is no pod's.
        test::NetnsGuard node(rig.veth().rxNs());
        const Fd own = ipc::listenAbstract("@npf-test-" + std::to_string(::getpid()));
        const int fds[] = {own.get()};
        EXPECT_EQ(refusal(addReq(pod), fds).rfind("not_allowed", 0), 0u) << refusal(addReq(pod), fds);
    }
    const test::Netns ns("npfpa");
    Fd inPod;
    {
        test::NetnsGuard in(ns);
        inPod = ipc::listenAbstract(ipc::kPodSocket);
    }
    const int fds[] = {inPod.get()};
    for (const char* bad : {R"({"type": "pod_add", "container": "../x", "namespace": "a", "name": "b", "addrs": ["198.18.0.1"]})",
                            R"({"type": "pod_add", "container": "x", "namespace": "A_B", "name": "b", "addrs": ["198.18.0.1"]})",
                            R"({"type": "pod_add", "container": "x", "namespace": "a", "name": "b", "addrs": []})",
                            R"({"type": "pod_add", "container": "x", "namespace": "a", "name": "b", "addrs": ["nowhere"]})",
                            R"({"type": "pod_del"})", R"({"type": "teleport"})"})
        EXPECT_EQ(refusal(nlohmann::ordered_json::parse(bad), fds).rfind("bad_message", 0), 0u) << bad;
    EXPECT_EQ(refusal(addReq(pod), fds), "accepted");
    EXPECT_EQ(refusal(nlohmann::ordered_json::parse(R"({"type": "pod_del", "container": "never-added"})"), {}),
              "accepted");
    const auto pods = ch.call(ipc::PodsRequest{});
    EXPECT_EQ(pods.reply.containers, std::vector<std::string>{"bad01"});
}

} // namespace
} // namespace npf::e2e
