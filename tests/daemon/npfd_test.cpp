// npfd end to end (root; the rig's namespaces): unprivileged clients (uid
// 65534, npf-recv --connect) receive socat streams byte for byte through one
// npfd; a client killed mid-stream does not disturb another; bad clients are
// refused or disconnected while npfd keeps serving; npfd's death is a clear
// error to its clients, and a restarted npfd serves them again; a forged
// descriptor never reaches another client's region.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/flow_ring.h"
#include "engine_fixture.h"
#include "huge_pages.h"
#include "ipc/channel.h"
#include "ipc/protocol.h"
#include "ipc/unix_socket.h"
#include "npf/client.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

class NpfdE2E : public EngineE2E {};

// `npfctl flow list --json` of the rx interface has a flow on `port`.
bool flowListed(Rig& rig, uint16_t port)
{
    const nlohmann::json j = nlohmann::json::parse(rig.npfctl("flow list --json " + rig.rxIf()), nullptr, false);
    if (j.is_discarded() || !j.contains("flows")) {
        ADD_FAILURE() << "npfctl flow list --json gave no flow list";
        return true;
    }
    for (const auto& f : j["flows"])
        if (f.value("port", 0) == port)
            return true;
    return false;
}

// ---- unprivileged clients, streams ------------------------------------------------

TEST_F(NpfdE2E, TwoUnprivilegedClientsReceiveSocatStreamsByteForByte)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    struct stat st{};
    ASSERT_EQ(::stat(npfd.socket().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660u) << "the socket is for its group only";
    EXPECT_EQ(st.st_gid, 65534u) << "socket_group nogroup";

    const size_t size = 2 << 20;
    const uint16_t warmPort = kFirstPort + 1, coldPort = kFirstPort + 2;
    const std::string inA = dir.path + "/a.in", inB = dir.path + "/b.in";
    writeStream(inA, size, 1);
    writeStream(inB, size, 2);
    const std::string n = std::to_string(size / 1024);
    auto a = startClientRecv(rig, npfd, warmPort, dir.path + "/a.out", dir.path + "/a.err", {"-n", n, "--idle", "3"});
    // The second one cold, in a region 8x larger than its resident budget.
    auto b = startClientRecv(rig, npfd, coldPort, dir.path + "/b.out", dir.path + "/b.err",
                             {"-n", n, "--idle", "3", "--cold", "--region", "16M", "--budget", "2M"});
    ASSERT_TRUE(a->ready());
    ASSERT_TRUE(b->ready());
    int sa = -1, sb = -1;
    std::thread ta([&] { sa = socatSend(rig, inA, warmPort); });
    std::thread tb([&] { sb = socatSend(rig, inB, coldPort); });
    ta.join();
    tb.join();
    EXPECT_EQ(sa, 0);
    EXPECT_EQ(sb, 0);
    int ea = -1, eb = -1;
    ASSERT_TRUE(a->wait(int(test::kDeadline.count()), &ea)) << readFile(dir.path + "/a.err");
    ASSERT_TRUE(b->wait(int(test::kDeadline.count()), &eb)) << readFile(dir.path + "/b.err");
    EXPECT_EQ(ea, 0) << readFile(dir.path + "/a.err");
    EXPECT_EQ(eb, 0) << readFile(dir.path + "/b.err");
    EXPECT_TRUE(readFile(dir.path + "/a.out") == readFile(inA)) << "warm client's output differs from its stream";
    EXPECT_TRUE(readFile(dir.path + "/b.out") == readFile(inB)) << "cold client's output differs from its stream";
    const std::string errB = readFile(dir.path + "/b.err");
    EXPECT_NE(errB.find("evicted="), std::string::npos) << errB;
    EXPECT_EQ(errB.find("evicted=0 "), std::string::npos) << "the cold client's budget never evicted:\n" << errB;
    EXPECT_NE(errB.find(" route=client-memfd-4k "), std::string::npos) << "its summary names its route:\n" << errB;
    // Both clients are gone; npfd's totals (npfctl stats) still count what they received.
    const uint64_t total = 2 * (size / 1024);
    Counters eng;
    EXPECT_TRUE(test::waitUntil([&] {
        eng = rig.engineSnapshot();
        return eng["completed_ok"] >= total;
    })) << describe(eng);
    EXPECT_EQ(eng["completed_ok"], total) << describe(eng);
    const std::string log = npfd.log();
    EXPECT_NE(log.find("uid 65534"), std::string::npos) << log;
    EXPECT_NE(log.find("port " + std::to_string(coldPort)), std::string::npos) << log;
}

// The README's sidecar shape: two npf-recv --connect clients with default
// options under one rule with the sidecar manifest's 64 MiB of budget for
// all its connections (4 of them here). Each gets the rule's fair share,
// not the whole of it, so the second gets in too; both receive byte for byte.
TEST_F(NpfdE2E, TwoDefaultClientsOfOneRuleBothGetIn)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir,
              NpfdOptions{.clients = R"([{"uid": 65534, "ports": ["7400-7499"], "region_bytes": 268435456,
                                         "resident_bytes": 67108864, "flows": 8, "connections": 4}])"});
    const size_t size = 1 << 20;
    const std::string n = std::to_string(size / 1024);
    std::vector<std::unique_ptr<Child>> clients;
    for (int i = 0; i < 2; ++i) {
        writeStream(dir.path + "/" + std::to_string(i) + ".in", size, uint32_t(10 + i));
        clients.push_back(startClientRecv(rig, npfd, uint16_t(kFirstPort + 10 + i),
                                          dir.path + "/" + std::to_string(i) + ".out",
                                          dir.path + "/" + std::to_string(i) + ".err", {"-n", n, "--idle", "3"}));
    }
    for (int i = 0; i < 2; ++i)
        ASSERT_TRUE(clients[i]->ready()) << "client " << i << ":\n"
                                         << readFile(dir.path + "/" + std::to_string(i) + ".err");
    for (int i = 0; i < 2; ++i) {
        const std::string p = dir.path + "/" + std::to_string(i);
        EXPECT_EQ(socatSend(rig, p + ".in", uint16_t(kFirstPort + 10 + i)), 0);
        int st = -1;
        ASSERT_TRUE(clients[i]->wait(int(test::kDeadline.count()), &st)) << readFile(p + ".err");
        EXPECT_EQ(st, 0) << readFile(p + ".err");
        EXPECT_TRUE(readFile(p + ".out") == readFile(p + ".in")) << "client " << i << "'s output differs";
        // 64 MiB shared by the rule's 4 connections.
        EXPECT_NE(readFile(p + ".err").find(" budget_mib=16.0 "), std::string::npos) << readFile(p + ".err");
    }
}

TEST_F(NpfdE2E, KillingOneClientMidStreamDoesNotDisturbTheOther)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const uint16_t portA = kFirstPort + 10, portB = kFirstPort + 11;
    const std::string inA = dir.path + "/a.in", inB = dir.path + "/b.in", outB = dir.path + "/b.out";
    writeStream(inA, 2 << 20, 3);
    writeStream(inB, 8 << 20, 4);
    auto a = startClientRecv(rig, npfd, portA, dir.path + "/a.out", dir.path + "/a.err",
                             {"-n", std::to_string((2 << 20) / 1024), "--idle", "3"});
    auto b = startClientRecv(rig, npfd, portB, outB, dir.path + "/b.err", {});
    ASSERT_TRUE(a->ready());
    ASSERT_TRUE(b->ready());
    std::thread tb([&] { (void)socatSend(rig, inB, portB); }); // fails once B is gone: fine
    ASSERT_TRUE(test::waitUntil([&] {
        std::error_code ec;
        return std::filesystem::file_size(outB, ec) >= (256u << 10);
    })) << "client B received nothing";
    b->kill(SIGKILL);
    int st = -1;
    ASSERT_TRUE(b->wait(int(test::kDeadline.count()), &st));
    EXPECT_EQ(st, 128 + SIGKILL);
    EXPECT_EQ(socatSend(rig, inA, portA), 0);
    tb.join();
    int ea = -1;
    ASSERT_TRUE(a->wait(int(test::kDeadline.count()), &ea)) << readFile(dir.path + "/a.err");
    EXPECT_EQ(ea, 0) << readFile(dir.path + "/a.err");
    EXPECT_TRUE(readFile(dir.path + "/a.out") == readFile(inA)) << "client A's stream was disturbed";
    EXPECT_TRUE(npfd.running()) << npfd.log();
    // B's flow is gone: its port's datagrams pass to the kernel (no flow).
    ASSERT_TRUE(test::waitUntil([&] { return npfd.log().find("disconnected") != std::string::npos ||
                                             npfd.log().find("hung up") != std::string::npos; }))
        << npfd.log();
    EXPECT_FALSE(flowListed(rig, portB)) << rig.npfctl("flow list " + rig.rxIf());
}

// SIGTERM: npfd withdraws its clients' flows and exits 0; it detaches the
// XDP program only if it attached it, not if `npfctl attach` did.
TEST_F(NpfdE2E, SigtermDetachesOnlyWhatNpfdAttached)
{
    Rig rig;
    TempDir dir;
    auto attached = [&] {
        const std::string st = rig.statusJson();
        return !st.empty() && nlohmann::json::parse(st)["state"] == "attached";
    };
    {
        Npfd npfd(rig, dir); // nothing attached: npfd attaches
        ASSERT_TRUE(attached());
        Client cli({.socket = npfd.socket(), .regionSize = 1 << 20});
        (void)cli.openFlow(kFirstPort + 80);
        EXPECT_EQ(npfd.stop(), 0) << npfd.log();
        EXPECT_FALSE(attached()) << "npfd left the program it attached";
        EXPECT_NE(cli.failure(), "");
    }
    ASSERT_TRUE(rig.npfctlOk("attach " + rig.rxIf()));
    {
        Npfd npfd(rig, dir);
        Client cli({.socket = npfd.socket(), .regionSize = 1 << 20});
        (void)cli.openFlow(kFirstPort + 81);
        EXPECT_EQ(npfd.stop(), 0) << npfd.log();
        EXPECT_TRUE(attached()) << "npfd detached the program npfctl attached";
        EXPECT_FALSE(flowListed(rig, kFirstPort + 81)) << "its client's flow stayed:\n"
                                                       << rig.npfctl("flow list " + rig.rxIf());
    }
}

// ---- bad clients ---------------------------------------------------------------------

// A raw connection: whatever bytes and descriptors a test wants to send.
struct Raw {
    explicit Raw(const std::string& path) : fd(ipc::connectSocket(path)) {}
    void send(std::string_view bytes, std::span<const int> fds = {})
    {
        ASSERT_EQ(ipc::sendMessage(fd.get(), bytes, fds), ipc::IoStatus::Ok);
    }
    // The next message, or nullopt once npfd closed the connection.
    std::optional<ipc::Message> next()
    {
        pollfd p{fd.get(), POLLIN, 0};
        if (::poll(&p, 1, int(test::kDeadline.count())) != 1)
            throw std::runtime_error("npfd did not answer within the deadline");
        ipc::RecvResult r = ipc::recvMessage(fd.get());
        if (r.status == ipc::IoStatus::Eof)
            return std::nullopt;
        return ipc::parse(r.message.bytes);
    }
    // An error reply with `code`, then (if `closes`) the end of the connection.
    ::testing::AssertionResult refused(ipc::ErrorCode code, bool closes)
    {
        std::optional<ipc::Message> m = next();
        if (!m)
            return ::testing::AssertionFailure() << "closed without a reply";
        if (m->type != "error")
            return ::testing::AssertionFailure() << "reply " << m->body.dump();
        ipc::ErrorReply e = ipc::ErrorReply::decode(*m);
        if (e.code != code)
            return ::testing::AssertionFailure() << "error " << ipc::toString(e.code) << ": " << e.message;
        if (closes && next())
            return ::testing::AssertionFailure() << "npfd kept the connection";
        return ::testing::AssertionSuccess() << e.message;
    }
    Fd fd;
};

// A good client still opens a flow and receives: npfd serves on.
void expectServes(Rig& rig, const Npfd& npfd, uint16_t port)
{
    Client cli({.socket = npfd.socket(), .regionSize = 4 << 20, .name = "probe"});
    Flow& f = cli.openFlow(port);
    for (uint32_t i = 0; i < 8; i++)
        ASSERT_TRUE(f.post(i * 2048, 2048));
    f.flush();
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 9, .count = 8, .dstPort = port, .size = [](uint32_t) { return 700u; }}),
              "");
    npf_completion c[8];
    const size_t got = awaitCompletions(f, c);
    ASSERT_EQ(got, 8u) << npfd.log();
    for (size_t i = 0; i < got; i++) {
        ASSERT_EQ(c[i].status, NPF_CS_OK);
        std::vector<uint8_t> want = payloadFor(senderId(9, uint32_t(i)), 700);
        EXPECT_EQ(std::memcmp(cli.region() + c[i].offset, want.data(), 700), 0) << "datagram " << i;
    }
}

TEST_F(NpfdE2E, BadClientsAreRefusedOrDisconnectedAndNpfdServesOn)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    using ipc::ErrorCode;
    const std::string hello = ipc::HelloRequest{}.encode(1);
    {
        SCOPED_TRACE("garbage");
        Raw r(npfd.socket());
        r.send("\x01\x02 this is not json");
        EXPECT_TRUE(r.refused(ErrorCode::BadMessage, true));
    }
    {
        SCOPED_TRACE("truncated message");
        Raw r(npfd.socket());
        r.send(hello.substr(0, hello.size() / 2));
        EXPECT_TRUE(r.refused(ErrorCode::BadMessage, true));
    }
    {
        SCOPED_TRACE("oversized message");
        Raw r(npfd.socket());
        const std::string big(100000, '{'); // sendMessage refuses to: the raw syscall
        ASSERT_EQ(::send(r.fd.get(), big.data(), big.size(), MSG_NOSIGNAL), ssize_t(big.size())) << strerror(errno);
        EXPECT_TRUE(r.refused(ErrorCode::BadMessage, true));
    }
    {
        SCOPED_TRACE("request before hello");
        Raw r(npfd.socket());
        r.send(ipc::OpenFlowRequest{.port = kFirstPort}.encode(1));
        EXPECT_TRUE(r.refused(ErrorCode::BadMessage, true));
    }
    {
        SCOPED_TRACE("wrong protocol version");
        Raw r(npfd.socket());
        r.send(ipc::HelloRequest{.protocol = 99}.encode(1));
        EXPECT_TRUE(r.refused(ErrorCode::BadVersion, true));
    }
    {
        SCOPED_TRACE("wrong descriptor types");
        Raw r(npfd.socket());
        r.send(hello);
        ASSERT_TRUE(r.next().has_value());
        Fd e1(::eventfd(0, EFD_CLOEXEC)), e2(::eventfd(0, EFD_CLOEXEC));
        const int fds[2] = {e1.get(), e2.get()};
        r.send(ipc::RegionRequest{.size = 1 << 20, .budget = 1 << 20, .base = 1 << 30}.encode(2), fds);
        EXPECT_TRUE(r.refused(ErrorCode::BadFd, true));
    }
    {
        SCOPED_TRACE("flow before region");
        Raw r(npfd.socket());
        r.send(hello);
        ASSERT_TRUE(r.next().has_value());
        r.send(ipc::OpenFlowRequest{.port = kFirstPort}.encode(2));
        EXPECT_TRUE(r.refused(ErrorCode::NoRegion, false));
    }
    {
        SCOPED_TRACE("hangs: never reads its replies");
        Raw r(npfd.socket());
        r.send(hello);
        const std::string stats = ipc::StatsRequest{}.encode(3);
        bool dropped = false;
        for (int i = 0; i < 100000 && !dropped; i++)
            dropped = ipc::sendMessage(r.fd.get(), stats) != ipc::IoStatus::Ok;
        // Its replies fill the socket: npfd disconnects it.
        EXPECT_TRUE(dropped) << "npfd kept a client that does not read its replies";
        EXPECT_TRUE(test::waitUntil([&] { return npfd.log().find("does not take its replies") != std::string::npos; }))
            << npfd.log();
        expectServes(rig, npfd, kFirstPort + 20);
    }
    {
        SCOPED_TRACE("unprivileged: region too large, port not allowed, port busy");
        Client holder({.socket = npfd.socket(), .regionSize = 1 << 20, .name = "holder"});
        (void)holder.openFlow(kFirstPort + 30);
        struct Case {
            const char* what;
            std::vector<std::string> args;
            const char* says;
        } cases[] = {
            {"too large", {"--region", "1G"}, "too_large"},
            {"not allowed", {}, "not_allowed"},
            {"busy", {}, "busy"},
        };
        const uint16_t ports[] = {kFirstPort + 31, 8000, kFirstPort + 30};
        // A flow for one address overlaps another client's wildcard flow on
        // the port (XDP prefers the exact address): busy too.
        try {
            Client thief({.socket = npfd.socket(), .regionSize = 1 << 20, .name = "thief"});
            (void)thief.openFlow(kFirstPort + 30, rig.rxAddr());
            ADD_FAILURE() << "a second client opened an address on a port another client holds";
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find("busy"), std::string::npos) << e.what();
        }
        for (size_t i = 0; i < std::size(cases); i++) {
            SCOPED_TRACE(cases[i].what);
            const std::string err = dir.path + "/bad" + std::to_string(i) + ".err";
            std::vector<std::string> a = {"setpriv",     "--reuid=65534", "--regid=65534",           "--clear-groups",
                                          NPF_RECV_PATH, rig.rxIf(),      std::to_string(ports[i]), "--connect",
                                          npfd.socket()};
            a.insert(a.end(), cases[i].args.begin(), cases[i].args.end());
            Child c(rig.veth().rxNs().path(), a, err);
            int st = -1;
            ASSERT_TRUE(c.wait(int(test::kDeadline.count()), &st));
            EXPECT_NE(st, 0);
            EXPECT_NE(readFile(err).find(cases[i].says), std::string::npos) << readFile(err);
        }
    }
    {
        SCOPED_TRACE("killed (SIGKILL) with a region and a flow");
        const std::string err = dir.path + "/killed.err";
        auto c = startClientRecv(rig, npfd, kFirstPort + 40, dir.path + "/killed.out", err, {"--cold"});
        ASSERT_TRUE(c->ready());
        c->kill(SIGKILL);
        int st = -1;
        ASSERT_TRUE(c->wait(int(test::kDeadline.count()), &st));
        // Its port is free again for another client.
        ASSERT_TRUE(test::waitUntil([&] {
            try {
                Client again({.socket = npfd.socket(), .regionSize = 1 << 20});
                (void)again.openFlow(kFirstPort + 40);
                return true;
            } catch (const std::exception&) {
                return false;
            }
        })) << npfd.log();
    }
    EXPECT_TRUE(npfd.running()) << npfd.log();
    expectServes(rig, npfd, kFirstPort + 21);
}

// A client's posted buffers are protected from eviction as an in-process
// application's are: populating far more than the budget evicts other pages,
// and the datagrams then land in posted buffers that stayed resident (no
// completion took the fault path).
TEST_F(NpfdE2E, PostedBuffersOfAClientAreNotEvicted)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const uint16_t port = kFirstPort + 70;
    Client cli({.socket = npfd.socket(), .regionSize = 16 << 20, .residentBudget = 1 << 20, .name = "protected"});
    Flow& f = cli.openFlow(port);
    constexpr uint32_t kN = 128; // 512 KiB of the 1 MiB budget
    ASSERT_EQ(cli.populate(0, kN * 4096), kN);
    for (uint32_t i = 0; i < kN; i++)
        ASSERT_TRUE(f.post(i * 4096, 4096));
    f.flush();
    EXPECT_GT(cli.populate(8 << 20, 8 << 20), 0u); // 8 MiB through a 1 MiB budget
    const EngineStats s = cli.stats();
    EXPECT_GT(s.evicted, 0u);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 5, .count = kN, .dstPort = port,
                                         .size = [](uint32_t) { return 1200u; }}), "");
    std::vector<npf_completion> c(kN);
    ASSERT_EQ(awaitCompletions(f, c), kN);
    size_t faulted = 0;
    for (size_t i = 0; i < kN; i++) {
        ASSERT_EQ(c[i].status, NPF_CS_OK);
        faulted += (c[i].flags & NPF_CF_FAULT) != 0;
        std::vector<uint8_t> want = payloadFor(senderId(5, uint32_t(i)), 1200);
        ASSERT_EQ(std::memcmp(cli.region() + c[i].offset, want.data(), 1200), 0) << "datagram " << i;
    }
    EXPECT_EQ(faulted, 0u) << "posted buffers were evicted";
}

// A node serves many pods: 64 clients at once, each with its own region and
// flow, each receives exactly its own datagrams.
TEST_F(NpfdE2E, SixtyFourClientsEachReceiveTheirOwn)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    constexpr uint32_t kClients = 64, kN = 4;
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<Flow*> flows;
    for (uint32_t i = 0; i < kClients; i++) {
        clients.push_back(std::make_unique<Client>(
            ClientConfig{.socket = npfd.socket(), .regionSize = 1 << 20, .name = "pod" + std::to_string(i)}));
        flows.push_back(&clients.back()->openFlow(static_cast<uint16_t>(kFirstPort + 100 + i)));
        for (uint32_t k = 0; k < kN; k++)
            ASSERT_TRUE(flows.back()->post(k * 4096, 2048));
        flows.back()->flush();
    }
    for (uint32_t i = 0; i < kClients; i++) {
        ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = i + 1, .count = kN,
                                             .dstPort = static_cast<uint16_t>(kFirstPort + 100 + i),
                                             .size = [](uint32_t k) { return 300u + k; }}), "");
    }
    for (uint32_t i = 0; i < kClients; i++) {
        SCOPED_TRACE("client " + std::to_string(i));
        npf_completion c[kN];
        ASSERT_EQ(awaitCompletions(*flows[i], c), kN);
        for (uint32_t k = 0; k < kN; k++) {
            ASSERT_EQ(c[k].status, NPF_CS_OK);
            std::vector<uint8_t> want = payloadFor(senderId(i + 1, k), 300 + k);
            ASSERT_EQ(c[k].len, 300u + k);
            ASSERT_EQ(std::memcmp(clients[i]->region() + c[k].offset, want.data(), want.size()), 0) << "datagram " << k;
        }
    }
    const std::string status = rig.statusJson();
    ASSERT_FALSE(status.empty());
    EXPECT_EQ(nlohmann::json::parse(status)["regions"], kClients) << status;
}

// npfd --pagers 2 on one queue: pager 0 drains the backup ring into every
// client's region, the regions' own work (the clients' faults, protection of
// their posts, prefetch) alternates between the pagers by region. Two cold
// clients under a budget receive, their data is pushed out by a populate,
// and reading it back takes client faults each region's owner serves.
TEST_F(NpfdE2E, TwoPagersServeTwoClientsFaultsAndEvictions)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, {"--pagers", "2"});
    EXPECT_NE(npfd.log().find("2 pagers"), std::string::npos) << npfd.log();
    constexpr uint32_t kClients = 2, kN = 192; // 768 KiB of buffers each, 1 MiB budget
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<Flow*> flows;
    for (uint32_t i = 0; i < kClients; i++) {
        clients.push_back(std::make_unique<Client>(ClientConfig{.socket = npfd.socket(), .regionSize = 16 << 20,
                                                                .residentBudget = 1 << 20,
                                                                .name = "pager-shard" + std::to_string(i)}));
        flows.push_back(&clients.back()->openFlow(static_cast<uint16_t>(kFirstPort + 200 + i)));
        for (uint32_t k = 0; k < kN; k++)
            ASSERT_TRUE(flows.back()->post(k * 4096, 4096));
        flows.back()->flush();
    }
    std::vector<std::unique_ptr<Sender>> tx;
    for (uint32_t i = 0; i < kClients; i++) {
        tx.push_back(std::make_unique<Sender>(
            rig.veth(), SendPlan{.sender = i + 1, .count = kN, .dstPort = static_cast<uint16_t>(kFirstPort + 200 + i),
                                 .size = [](uint32_t k) { return 1000u + k; }}));
        tx.back()->start();
    }
    for (auto& t : tx) {
        t->join();
        ASSERT_EQ(t->error(), "");
    }
    for (uint32_t i = 0; i < kClients; i++) {
        SCOPED_TRACE("client " + std::to_string(i));
        std::vector<npf_completion> c(kN);
        ASSERT_EQ(awaitCompletions(*flows[i], c), kN);
        EXPECT_GT(clients[i]->populate(8 << 20, 8 << 20), 0u); // pushes the received pages out
        const EngineStats before = clients[i]->stats();
        EXPECT_GT(before.evicted, 0u);
        for (uint32_t k = 0; k < kN; k++) {
            ASSERT_EQ(c[k].status, NPF_CS_OK);
            ASSERT_EQ(c[k].len, 1000u + k);
            std::vector<uint8_t> want = payloadFor(senderId(i + 1, k), 1000 + k);
            ASSERT_EQ(std::memcmp(clients[i]->region() + c[k].offset, want.data(), want.size()), 0)
                << "datagram " << k;
        }
        const EngineStats after = clients[i]->stats();
        EXPECT_GT(after.restored, before.restored) << "reading the evicted data back restored nothing";
        EXPECT_GT(after.cpuFaults, before.cpuFaults) << "reading the evicted data back took no client fault";
    }
}

// ---- npfd's death, a restart ------------------------------------------------------

TEST_F(NpfdE2E, NpfdDeathIsAClearErrorAndARestartedNpfdServesAgain)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const uint16_t port = kFirstPort + 50;
    // 128 datagrams, a page each, through a 64-page budget: npfd evicts half.
    Client cli({.socket = npfd.socket(), .regionSize = 4 << 20, .residentBudget = 256 << 10, .name = "survivor"});
    Flow& f = cli.openFlow(port);
    constexpr uint32_t kN = 128;
    auto size = [](uint32_t) { return 900u; };
    for (uint32_t i = 0; i < kN; i++)
        ASSERT_TRUE(f.post(i * 4096, 2048));
    f.flush();
    auto receive = [&](Flow& flow, uint32_t sender) {
        ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = sender, .count = kN, .dstPort = port, .size = size}), "");
        std::vector<npf_completion> c(kN);
        ASSERT_EQ(awaitCompletions(flow, c), kN);
        for (size_t i = 0; i < kN; i++)
            ASSERT_EQ(c[i].status, NPF_CS_OK);
    };
    receive(f, 1);
    // Installs evict only down to the budget while buffers are protected
    // (posted, not yet published): a populate after the completions evicts
    // the received pages beyond it, deterministically.
    ASSERT_EQ(cli.populate(3 << 20, 4096), 1u);
    EXPECT_GT(cli.stats().evicted, 0u) << "nothing was evicted: the test proves nothing about the spill";

    npfd.kill(SIGKILL);
    int st = -1;
    ASSERT_TRUE(npfd.wait(int(test::kDeadline.count()), &st));
    // wait() returns at once with a reason, not after its timeout, and not never.
    npf_completion c[4];
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(f.wait(c, 20s), -EPIPE);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
    EXPECT_NE(f.failure().find("npfd"), std::string::npos) << f.failure();
    EXPECT_NE(cli.failure(), "");
    // What it received stays in its region, what npfd had evicted too (it
    // came back from the client's spill file).
    EXPECT_GT(cli.restoredPages(), 0u);
    for (uint32_t i = 0; i < kN; i++) {
        std::vector<uint8_t> want = payloadFor(senderId(1, i), 900);
        ASSERT_EQ(std::memcmp(cli.region() + i * 4096, want.data(), 900), 0) << "datagram " << i;
    }
    // Traffic fails open: no socket serves the port any more.
    const uint64_t passed0 = rig.xdpStat(NPF_STAT_PASS_NO_SOCKET) + rig.xdpStat(NPF_STAT_PASS_NO_FLOW);
    sendDatagrams(rig.veth(), {.sender = 2, .count = 10, .dstPort = port, .size = size});
    EXPECT_TRUE(test::waitUntil([&] {
        return rig.xdpStat(NPF_STAT_PASS_NO_SOCKET) + rig.xdpStat(NPF_STAT_PASS_NO_FLOW) >= passed0 + 10;
    }));

    npfd.start();
    cli.reconnect();
    EXPECT_EQ(cli.failure(), "");
    Flow& again = cli.openFlow(port);
    for (uint32_t i = 0; i < kN; i++)
        ASSERT_TRUE(again.post((kN + i) * 4096, 2048));
    again.flush();
    receive(again, 3);
    for (uint32_t i = 0; i < kN; i++) {
        std::vector<uint8_t> first = payloadFor(senderId(1, i), 900), second = payloadFor(senderId(3, i), 900);
        ASSERT_EQ(std::memcmp(cli.region() + i * 4096, first.data(), 900), 0) << "datagram " << i;
        ASSERT_EQ(std::memcmp(cli.region() + (kN + i) * 4096, second.data(), 900), 0) << "datagram " << i;
    }
}

// A client with 2 MiB pages (a hugetlbfs memfd): it receives, npfd evicts
// whole huge pages to its budget, and when npfd dies what it had evicted
// comes back from the client's spill through a second mapping (hugetlbfs has
// no write(2)).
TEST_F(NpfdE2E, HugePageClientReceivesAndSurvivesNpfd)
{
    topology::HugePages pool(8);
    if (!pool.ok())
        GTEST_SKIP() << "2 MiB huge pages unavailable: " << pool.why();
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const uint16_t port = kFirstPort + 55;
    constexpr uint64_t kHuge = 2ull << 20;
    // 8 pages of 2 MiB through a budget of 2.
    Client cli({.socket = npfd.socket(), .regionSize = 8 * kHuge, .pageSize = kHuge, .residentBudget = 2 * kHuge,
                .name = "huge"});
    Flow& f = cli.openFlow(port);
    constexpr uint32_t kN = 128; // 32 per page over the first 4 pages
    constexpr uint64_t kStride = 64 << 10;
    for (uint32_t i = 0; i < kN; i++)
        ASSERT_TRUE(f.post(i * kStride, 2048));
    f.flush();
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 1, .count = kN, .dstPort = port,
                                         .size = [](uint32_t) { return 900u; }}), "");
    std::vector<npf_completion> c(kN);
    ASSERT_EQ(awaitCompletions(f, c), kN) << npfd.log();
    for (size_t i = 0; i < kN; i++)
        ASSERT_EQ(c[i].status, NPF_CS_OK);
    // The buffers are no longer protected: installing page 7 evicts down to the budget.
    ASSERT_EQ(cli.populate(7 * kHuge, 4096), 1u);
    EXPECT_GE(cli.stats().evicted, 2u) << "nothing was evicted: the test proves nothing about the spill";
    for (uint32_t i = 0; i < kN; i++) {
        std::vector<uint8_t> want = payloadFor(senderId(1, i), 900);
        ASSERT_EQ(std::memcmp(cli.region() + i * kStride, want.data(), 900), 0) << "datagram " << i << " (via npfd)";
    }
    ASSERT_EQ(cli.populate(6 * kHuge, 4096), 1u); // evicts again what the reads brought back
    // resident_pages counts 4 KiB pages whatever the page size: 1 or 2 huge pages here.
    const uint64_t resident = cli.stats().residentPages;
    EXPECT_TRUE(resident == 512 || resident == 1024) << resident << " 4 KiB pages resident";

    // An unprivileged npf-recv with 2 MiB pages, beside it: a socat stream byte for byte.
    const std::string in = dir.path + "/huge.in", out = dir.path + "/huge.out", err = dir.path + "/huge.err";
    writeStream(in, 1 << 20, 9);
    auto recv = startClientRecv(rig, npfd, port + 1, out, err,
                                {"-n", "1024", "--idle", "3", "--cold", "--region", "16M", "--budget", "4M",
                                 "--page-size", "2M"});
    ASSERT_TRUE(recv->ready());
    EXPECT_EQ(socatSend(rig, in, port + 1), 0);
    int rst = -1;
    ASSERT_TRUE(recv->wait(int(test::kDeadline.count()), &rst)) << readFile(err);
    EXPECT_EQ(rst, 0) << readFile(err);
    EXPECT_TRUE(readFile(out) == readFile(in)) << "the 2 MiB-page client's output differs from its stream";

    npfd.kill(SIGKILL);
    int st = -1;
    ASSERT_TRUE(npfd.wait(int(test::kDeadline.count()), &st));
    npf_completion none[1];
    EXPECT_EQ(f.wait(none, 20s), -EPIPE);
    EXPECT_NE(f.failure(), "");
    EXPECT_GT(cli.restoredPages(), 0u) << "no page came back from the spill";
    for (uint32_t i = 0; i < kN; i++) {
        std::vector<uint8_t> want = payloadFor(senderId(1, i), 900);
        ASSERT_EQ(std::memcmp(cli.region() + i * kStride, want.data(), 900), 0) << "datagram " << i << " after npfd";
    }
}

// ---- isolation -----------------------------------------------------------------------

// A client that writes forged descriptors into its own post ring -- offsets
// beyond its 1 MiB region, where the victim's 64 MiB region has data --
// gets drop_bad_desc for every datagram; the victim's region is untouched.
TEST_F(NpfdE2E, ForgedDescriptorsNeverReachAnotherClientsRegion)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const uint16_t victimPort = kFirstPort + 60, forgerPort = kFirstPort + 61;
    Client victim({.socket = npfd.socket(), .regionSize = 64 << 20, .name = "victim"});
    (void)victim.openFlow(victimPort);
    victim.populate(0, 64 << 20);
    std::memset(victim.region(), 0x5a, 64 << 20);

    // The forger speaks the protocol itself and maps the ring npfd hands it.
    const uint64_t kSize = 1 << 20;
    Fd memfd(::memfd_create("forger", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_TRUE(memfd);
    ASSERT_EQ(::ftruncate(memfd.get(), kSize), 0);
    void* base = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
    ASSERT_NE(base, MAP_FAILED);
    Fd uffd(static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY)));
    ASSERT_TRUE(uffd);
    uffdio_api api{.api = UFFD_API, .features = UFFD_FEATURE_MISSING_SHMEM, .ioctls = 0};
    ASSERT_EQ(::ioctl(uffd.get(), UFFDIO_API, &api), 0);
    uffdio_register reg{};
    reg.range = {reinterpret_cast<uint64_t>(base), kSize};
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    ASSERT_EQ(::ioctl(uffd.get(), UFFDIO_REGISTER, &reg), 0);
    ipc::Channel ch = ipc::Channel::connect(npfd.socket());
    (void)ch.call(ipc::HelloRequest{.name = "forger"});
    const int fds[2] = {memfd.get(), uffd.get()};
    (void)ch.call(ipc::RegionRequest{.size = kSize, .budget = kSize, .base = reinterpret_cast<uint64_t>(base)},
                  fds);
    auto opened = ch.call(ipc::OpenFlowRequest{.port = forgerPort});
    dataplane::FlowRing ring = dataplane::FlowRing::adopt(std::move(opened.fds[0]));
    constexpr uint32_t kN = 32;
    for (uint32_t i = 0; i < kN; i++)
        ring.posts()[i] = npf_post{.offset = (8ull << 20) + i * 4096, .len = 2048, .pad = 0};
    ring.cursor()->flags |= NPF_CURSOR_F_SERVED;
    std::atomic_ref<__u64>(ring.cursor()->prod).store(kN, std::memory_order_release);

    const uint64_t bad0 = rig.xdpStat(NPF_STAT_DROP_BAD_DESC);
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 4, .count = kN, .dstPort = forgerPort,
                                         .size = [](uint32_t) { return 1000u; }}), "");
    EXPECT_TRUE(test::waitUntil([&] { return rig.xdpStat(NPF_STAT_DROP_BAD_DESC) >= bad0 + kN; }))
        << "drop_bad_desc " << rig.xdpStat(NPF_STAT_DROP_BAD_DESC) - bad0;
    for (uint64_t off = 0; off < (64u << 20); off += 4096)
        ASSERT_EQ(victim.region()[off + 17], 0x5a) << "the victim's region changed at " << off;
    expectServes(rig, npfd, kFirstPort + 62);
    ::munmap(base, kSize);
}

// The issue's "done means" through npfd: a real packet generator's
// datagrams are accounted for exactly by an unprivileged npf-recv --connect,
// from the flow's own counters npfd answers (generatorAccounted).
TEST_F(NpfdE2E, NpfRecvConnectAccountsForEveryDatagramOfARealGenerator)
{
    if (!haveTrafgen())
        GTEST_SKIP() << "trafgen missing (netsniff-ng; scripts/deps.sh installs it)";
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir);
    const std::string err = dir.path + "/err";
    auto recv = startClientRecv(rig, npfd, kFirstPort, "/dev/null", err, {"--idle", "1", "--json"});
    ASSERT_TRUE(recv->ready());
    EXPECT_TRUE(generatorAccounted(rig, dir, *recv, err, kFirstPort, 200000));
}

} // namespace
} // namespace npf::e2e
