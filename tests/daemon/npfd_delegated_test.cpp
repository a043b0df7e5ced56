// npfd's delegated mode end to end (root; the rig's namespaces): npfd's
// config delegates the rig's rx interface, so its one client runs the data
// path itself, on the sockets npfd made and handed over:
//   - an unprivileged client (uid 65534, no capabilities: npf-recv
//     --connect) receives a socat stream byte for byte, in its own memory;
//   - one client at a time: a second one is refused, whatever mode it asks
//     for, and a client of a library that runs no data path is told why;
//   - a client killed mid-stream costs only itself: the next one gets new
//     sockets over a new UMEM and receives its stream;
//   - every datagram of a delegated flow accounted: the client's engine's
//     completions, XDP's counts from npfd (flow_stats), npfd's metrics;
//   - requests out of place or with forged descriptors are refused, and the
//     interface still serves the next client.
#include <signal.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>

#include "engine_fixture.h"
#include "ipc/channel.h"
#include "ipc/protocol.h"
#include "metrics_scrape.h"
#include "npf/client.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

class NpfdDelegated : public EngineE2E {};

NpfdOptions delegating(Rig& rig) { return {.settings = R"("delegate": [")" + rig.rxIf() + R"("])"}; }

// A stream of `size` bytes to `port`, received by an npf-recv client
// started with `extra`; its stderr.
std::string receiveStream(Rig& rig, Npfd& npfd, const TempDir& dir, const std::string& name, uint16_t port,
                          size_t size, uint32_t seed, const std::vector<std::string>& extra = {})
{
    const std::string in = dir.path + "/" + name + ".in", out = dir.path + "/" + name + ".out",
                      err = dir.path + "/" + name + ".err";
    writeStream(in, size, seed);
    std::vector<std::string> args = {"-n", std::to_string(size / 1024), "--idle", "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto c = startClientRecv(rig, npfd, port, out, err, args);
    EXPECT_TRUE(c->ready()) << readFile(err) << npfd.log();
    EXPECT_EQ(socatSend(rig, in, port), 0);
    int st = -1;
    EXPECT_TRUE(c->wait(int(test::kDeadline.count()), &st)) << readFile(err);
    EXPECT_EQ(st, 0) << readFile(err);
    EXPECT_TRUE(readFile(out) == readFile(in)) << name << "'s output differs from its stream:\n" << readFile(err);
    return readFile(err);
}

TEST_F(NpfdDelegated, AnUnprivilegedClientRunsTheDataPathItselfByteForByte)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, delegating(rig));
    const std::string err =
        receiveStream(rig, npfd, dir, "a", kFirstPort + 1, 2 << 20, 1, {"--client-mode", "delegated"});
    EXPECT_NE(err.find("npfd delegated " + rig.rxIf() + ": this process runs its data path"), std::string::npos)
        << err;
    // Its region is its own private memory, not a memfd npfd maps.
    EXPECT_EQ(err.find("route=client-"), std::string::npos) << err;
    const std::string log = npfd.log();
    EXPECT_NE(log.find("runs the data path of " + rig.rxIf()), std::string::npos) << log;
    EXPECT_NE(log.find("(delegated)"), std::string::npos) << log;
}

TEST_F(NpfdDelegated, AutoModeIsDelegatedWhereNpfdDelegates)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, delegating(rig));
    // In the test's network namespace: the sockets npfd hands over are
    // bound already, wherever the client runs.
    Client cli({.socket = npfd.socket(), .regionSize = 16 << 20, .residentBudget = 4 << 20});
    EXPECT_EQ(cli.mode(), ClientMode::Delegated);
    EXPECT_EQ(cli.delegatedIface(), rig.rxIf());
    Flow& f = cli.openFlow(kFirstPort + 2);
    EXPECT_EQ(f.stats().claimed(), 0u);
}

TEST_F(NpfdDelegated, OneClientAtATimeAndTheNextGetsNewSockets)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, delegating(rig));
    // The first client holds the interface, mid-stream when it is killed.
    const std::string inA = dir.path + "/a.in", outA = dir.path + "/a.out";
    writeStream(inA, 8 << 20, 3);
    auto a = startClientRecv(rig, npfd, kFirstPort + 3, outA, dir.path + "/a.err", {"--client-mode", "delegated"});
    ASSERT_TRUE(a->ready()) << readFile(dir.path + "/a.err");
    {
        for (ClientMode m : {ClientMode::Auto, ClientMode::Delegated}) {
            try {
                Client second({.socket = npfd.socket(), .mode = m, .regionSize = 16 << 20});
                ADD_FAILURE() << "a second client (" << toString(m) << ") got in";
            } catch (const std::exception& e) {
                EXPECT_NE(std::string(e.what()).find("is delegated to another client"), std::string::npos)
                    << e.what();
            }
        }
        try {
            Client brokered({.socket = npfd.socket(), .mode = ClientMode::Brokered, .regionSize = 16 << 20});
            ADD_FAILURE() << "a brokered client got in where the only interface is delegated";
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find("does not run one"), std::string::npos) << e.what();
        }
    }
    std::thread tx([&] { (void)socatSend(rig, inA, kFirstPort + 3); }); // cut short by the kill: fine
    ASSERT_TRUE(test::waitUntil([&] {
        std::error_code ec;
        return std::filesystem::file_size(outA, ec) >= (256u << 10);
    })) << "the first client received nothing:\n"
        << readFile(dir.path + "/a.err");
    a->kill(SIGKILL);
    int st = -1;
    ASSERT_TRUE(a->wait(int(test::kDeadline.count()), &st));
    tx.join();
    // The next client: new sockets, once the kernel let go of the old ones.
    const std::string err =
        receiveStream(rig, npfd, dir, "b", kFirstPort + 4, 2 << 20, 4, {"--client-mode", "delegated"});
    EXPECT_NE(err.find("this process runs its data path"), std::string::npos) << err;
    EXPECT_TRUE(npfd.running()) << npfd.log();
}

TEST_F(NpfdDelegated, EveryDatagramAccountedThroughNpfdsCounters)
{
    Rig rig;
    TempDir dir;
    const uint16_t mport = freePort(rig);
    NpfdOptions opt = delegating(rig);
    opt.extraArgs = {"--metrics", "127.0.0.1:" + std::to_string(mport)};
    Npfd npfd(rig, dir, opt);
    const uint16_t port = kFirstPort + 5;
    Client cli({.socket = npfd.socket(), .mode = ClientMode::Delegated, .regionSize = 4 << 20,
                .residentBudget = 4 << 20, .name = "accounted"});
    Flow& f = cli.openFlow(port);
    constexpr uint32_t kOk = 8, kRnr = 5, kLen = 2048;
    for (uint32_t i = 0; i < kOk; i++)
        ASSERT_TRUE(f.post(uint64_t(i) * 4096, kLen));
    f.flush();
    auto size = [](uint32_t) -> uint32_t { return 900; };
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 1, .count = kOk, .dstPort = port, .size = size}), "");
    std::vector<npf_completion> got(kOk);
    ASSERT_EQ(awaitCompletions(f, got), kOk) << npfd.log();
    for (const npf_completion& c : got)
        EXPECT_EQ(c.status, NPF_CS_OK);
    // No buffer posted: XDP drops them (drop_rnr), counted in npfd's map.
    ASSERT_EQ(sendDatagrams(rig.veth(), {.sender = 2, .count = kRnr, .dstPort = port, .size = size}), "");
    FlowStats s;
    ASSERT_TRUE(test::waitUntil([&] {
        s = f.stats();
        return s.xdpCount(NPF_STAT_DROP_RNR) >= kRnr;
    })) << npfd.log();
    EXPECT_EQ(s.xdpCount(NPF_STAT_DROP_RNR), kRnr);
    EXPECT_EQ(s.reached(), kOk + kRnr);
    EXPECT_EQ(s.claimed(), kOk);
    EXPECT_EQ(s.completedOk, kOk);
    EXPECT_EQ(s.inFlight, 0u);
    // npfd's metrics carry the flow's XDP outcomes with its client's labels.
    const std::string body = httpGet(rig, mport);
    const Scrape m = parse(body);
    ASSERT_TRUE(m.errors.empty()) << ::testing::PrintToString(m.errors);
    const std::string labels = "{iface=\"" + rig.rxIf() + "\",port=\"" + std::to_string(port) +
                               "\",client=\"accounted\",uid=\"0\",";
    EXPECT_EQ(m.at("npf_flow_dropped_total" + labels + "reason=\"drop_rnr\"}"), kRnr) << body;
}

TEST_F(NpfdDelegated, RequestsOutOfPlaceOrWithForgedDescriptorsAreRefused)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, delegating(rig));
    auto refused = [](const std::function<void()>& call, ipc::ErrorCode code) {
        try {
            call();
            return std::string("not refused");
        } catch (const ipc::RemoteError& e) {
            return e.code() == code ? std::string() : std::string("refused with ") + e.what();
        } catch (const std::exception& e) {
            return std::string("failed: ") + e.what();
        }
    };
    // A hello offering to run the data path: the interface npfd delegates.
    auto delegatedHello = [](ipc::Channel& ch) {
        ipc::HelloRequest hello;
        hello.delegate = 1;
        return ch.call(hello).reply.delegated;
    };
    {
        ipc::Channel ch = ipc::Channel::connect(npfd.socket());
        ASSERT_EQ(delegatedHello(ch), rig.rxIf());
        // Before delegate: no queue, no flow.
        EXPECT_EQ(refused([&] { (void)ch.call(ipc::QueueRequest{0}); }, ipc::ErrorCode::NoRegion), "");
        EXPECT_EQ(refused([&] { (void)ch.call(ipc::DelegateFlowRequest{.port = kFirstPort}); }, ipc::ErrorCode::NoRegion),
                  "");
        // A brokered region on a delegated connection (a protocol violation:
        // the connection ends).
        EXPECT_EQ(refused([&] { (void)ch.call(ipc::RegionRequest{.size = 1 << 20, .budget = 1 << 20, .base = 1 << 30}); },
                          ipc::ErrorCode::BadMessage),
                  "");
    }
    {
        ipc::Channel ch = ipc::Channel::connect(npfd.socket());
        ASSERT_EQ(delegatedHello(ch), rig.rxIf());
        // delegate takes no descriptor: one forged in is refused, and the
        // connection ends (a protocol violation).
        const int forged[1] = {0};
        EXPECT_EQ(refused([&] { (void)ch.call(ipc::DelegateRequest{.size = 1 << 20, .budget = 1 << 20}, forged); },
                          ipc::ErrorCode::BadFd),
                  "");
    }
    {
        ipc::Channel ch = ipc::Channel::connect(npfd.socket());
        ASSERT_EQ(delegatedHello(ch), rig.rxIf());
        auto d = ch.call(ipc::DelegateRequest{.size = 1 << 20, .budget = 1 << 20});
        EXPECT_EQ(d.reply.iface, rig.rxIf());
        EXPECT_EQ(d.fds.size(), 1u); // the resident bitmap
        auto q = ch.call(ipc::QueueRequest{0});
        EXPECT_EQ(q.fds.size(), 3u); // UMEM, primary, backup
        // A flow (root's rule allows any port): its post ring.
        auto fl = ch.call(ipc::DelegateFlowRequest{.port = kFirstPort + 6});
        EXPECT_EQ(fl.fds.size(), 1u);
        // The same flow twice: busy (the connection stays).
        EXPECT_EQ(refused([&] { (void)ch.call(ipc::DelegateFlowRequest{.port = kFirstPort + 6}); }, ipc::ErrorCode::Busy),
                  "");
        // A queue the interface does not have: a bad request, the connection ends.
        EXPECT_EQ(refused([&] { (void)ch.call(ipc::QueueRequest{d.reply.queues}); }, ipc::ErrorCode::BadMessage), "");
    } // hung up, with the sockets: npfd takes the interface back once they are closed
    // The next client is served.
    const std::string err = receiveStream(rig, npfd, dir, "after", kFirstPort + 7, 256 << 10, 7,
                                          {"--client-mode", "delegated"});
    EXPECT_NE(err.find("this process runs its data path"), std::string::npos) << err;
}

} // namespace
} // namespace npf::e2e
