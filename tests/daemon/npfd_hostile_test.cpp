// Hostile npfd clients (root; the rig's namespaces). Each test runs one
// attack of an unprivileged client (uid 65534) against npfd while a victim --
// npf-recv --connect as uid 65533, a rule of its own -- receives a socat
// stream, and then checks what every attack must leave intact:
//
//   - the victim receives byte for byte during the attack, and another one
//     after it;
//   - npfd answers a hello (one that does not is frozen: the test SIGKILLs it
//     and fails, it never hangs);
//   - npfd's open descriptors and memory (VmRSS, with slack) are back to
//     what they were before the attack once the hostile client is gone;
//   - npfd stops on SIGTERM, exit 0.
//
// The attacks:
//   1. the client clears O_NONBLOCK on its own userfaultfd (file status
//      flags live in the open file description it shares with npfd);
//   2. it makes its completion notifier blocking and full, sets the ring's
//      `waiting` word, and lets npfd signal it (traffic, or close_flow);
//   3. it sets O_APPEND on the spill memfd / the region memfd it handed npfd,
//      then forces eviction / traffic into present pages;
//   4. hundreds of connections that never say hello, npfd short of
//      descriptors (prlimit --nofile=256:256);
//   5. it opens a port the operator added with npfctl flow add;
//   6. many connections of one rule, each asking for the rule's whole limits.
//
// The hostile clients speak the protocol themselves, in this process: a
// thread that switched only its own effective uid (raw setresuid) connects,
// so SO_PEERCRED shows npfd uid 65534.
//
// NpfdHostileSoak (label soak, ctest npfd_hostile_soak with -DNPF_SOAK=ON, or
// NPF_HOSTILE_SOAK=1 and --gtest_filter=NpfdHostileSoak.*) runs a random mix
// of these attacks for NPF_SOAK_SECONDS (default 180) beside two victims
// receiving stream after stream.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/dataplane.h"
#include "dataplane/flows.h"
#include "engine_fixture.h"
#include "hostile_client.h"
#include "ipc/protocol.h"
#include "npfd_rig.h"
#include "sys/netns.h"

namespace npf::e2e {
namespace {

using ipc::ErrorCode;

// ---- the attacks --------------------------------------------------------------------

// 1. The userfaultfd npfd serves the client's faults through is the client's:
// it clears O_NONBLOCK on its copy, which is the same open file description
// as npfd's. An npfd that read() it blocks in the read.
::testing::AssertionResult blockingUserfaultfd(Npfd& npfd, uint16_t port, const During& during)
{
    Hostile h(npfd, "blocking-uffd");
    h.region(4 << 20, 1 << 20);
    HostileFlow f = h.openFlow(port);
    setFlag(h.uffd.get(), O_NONBLOCK, false);
    during();
    (void)h.ch.call(ipc::StatsRequest{}); // npfd still serves this very client
    return h.leave();
}

// 2. The completion notifier made blocking and full: O_NONBLOCK cleared,
// 0xfffffffffffffffe written into it (an eventfd's largest count: one more
// signal would block; npfd's pipe read end refuses the write with EBADF,
// ignored), and the ring's `waiting` word set, so npfd signals. Then either
// 200 datagrams (the pager publishes them and signals) or a close_flow (the
// control thread signals the flow's end).
::testing::AssertionResult blockedNotifier(Rig& rig, Npfd& npfd, uint16_t port, bool closeFlow, const During& during)
{
    Hostile h(npfd, "blocked-notifier");
    h.region(1 << 20, 1 << 20);
    HostileFlow f = h.openFlow(port);
    const uint64_t full = 0xfffffffffffffffe;
    (void)!::write(f.notifier.get(), &full, sizeof(full)); // still non-blocking: never waits here
    setFlag(f.notifier.get(), O_NONBLOCK, false);
    std::atomic_ref<__u64>(f.hdr()->waiting).store(1, std::memory_order_seq_cst);
    if (closeFlow) {
        (void)h.ch.call(ipc::CloseFlowRequest{.flow = f.id});
        during();
        return h.leave();
    }
    constexpr uint32_t kN = 200;
    for (uint32_t i = 0; i < 256; i++)
        f.post(i * 4096, 2048);
    f.publish();
    std::vector<npf_completion> got;
    if (auto r = receive(rig, f, port, 21, kN, [](uint32_t) { return 500u; }, 0, got); !r)
        return r << " (npfd stuck signalling the notifier?)";
    during();
    if (auto r = h.holds(got, 21, 500); !r)
        return r;
    return h.leave();
}

// 3a. O_APPEND on the spill memfd the client handed npfd (the flag is the
// shared open file description's): an npfd that pwrite()s evicted pages into
// it appends them, and the client's memory grows without bound. The spill
// must stay within the region's size, and what npfd evicted must be at its
// region offset in it.
::testing::AssertionResult appendOnlySpill(Rig& rig, Npfd& npfd, uint16_t port, const During& during)
{
    constexpr uint64_t kSize = 16 << 20, kBudget = 1 << 20, kStride = 64 << 10;
    constexpr uint32_t kN = 256;
    Hostile h(npfd, "append-spill");
    h.region(kSize, kBudget, true);
    setFlag(h.spill.get(), O_APPEND, true);
    HostileFlow f = h.openFlow(port);
    for (uint32_t i = 0; i < kN; i++)
        f.post(i * kStride, 2048);
    f.publish();
    std::vector<npf_completion> got;
    if (auto r = receive(rig, f, port, 31, kN, [](uint32_t) { return 1000u; }, 128, got); !r)
        return r;
    // Eviction, again and again: every page of the region through the budget, three times.
    for (int pass = 1; pass <= 3; pass++) {
        for (uint64_t off = 0; off < kSize; off += kBudget / 2)
            (void)h.ch.call(ipc::PopulateRequest{.offset = off, .len = kBudget / 2});
        if (const uint64_t s = fileSize(h.spill.get()); s > kSize)
            return ::testing::AssertionFailure()
                   << "after " << pass << " passes of eviction the client's spill memfd holds " << s
                   << " bytes, its region " << kSize << ": npfd appends what it evicts";
    }
    during();
    if (auto r = h.holds(got, 31, 1000); !r)
        return r << " (after eviction)";
    if (const uint64_t s = fileSize(h.spill.get()); s > kSize)
        return ::testing::AssertionFailure() << "the spill memfd holds " << s << " bytes, its region " << kSize;
    return h.leave();
}

// 3b. O_APPEND on the region memfd: an npfd that pwrite()s a datagram into
// a page already present appends it instead. 2048 datagrams of 700 bytes into
// buffers back to back (across page boundaries) of a cold region: they come
// faster than the pager installs pages, so many land in pages present by the
// time the pager places them. Every datagram completed OK must be in its
// buffer, and the memfd must keep its size.
::testing::AssertionResult appendOnlyRegion(Rig& rig, Npfd& npfd, uint16_t port, const During& during)
{
    constexpr uint64_t kSize = 4 << 20;
    constexpr uint32_t kN = 2048, kLen = 700;
    Hostile h(npfd, "append-region");
    h.region(kSize, kSize);
    setFlag(h.memfd.get(), O_APPEND, true);
    HostileFlow f = h.openFlow(port);
    for (uint32_t i = 0; i < kN; i++)
        f.post(uint64_t(i) * kLen, kLen);
    f.publish();
    std::vector<npf_completion> got;
    if (auto r = receive(rig, f, port, 32, kN, [](uint32_t) { return kLen; }, 1024, got); !r)
        return r;
    during();
    const uint64_t s = fileSize(h.memfd.get());
    auto r = h.holds(got, 32, kLen);
    if (!r || s > kSize)
        return ::testing::AssertionFailure() << "region memfd of " << s << " bytes (region " << kSize << "); "
                                             << r.message();
    return h.leave();
}

// Holds the flood until npfd closed one connection for want of a hello, runs
// `during`, then stops it. npfd must have closed idle connections and
// answered nothing but no_space and the hello timeout.
::testing::AssertionResult idleFlood(Npfd& npfd, size_t target, const During& during)
{
    IdleFlood flood(npfd.socket(), target);
    const bool timedOut = test::waitUntil([&] { return flood.timedOut > 0; });
    during();
    flood.stop();
    if (!timedOut)
        return ::testing::AssertionFailure() << "npfd closed no connection for want of a hello within "
                                             << test::kDeadline.count() << " ms: " << flood.describe();
    if (flood.other > 0 || !flood.failure().empty())
        return ::testing::AssertionFailure() << flood.describe();
    return ::testing::AssertionSuccess() << flood.describe();
}

// The flow npfctl (or npfd) has for `port` on the rig's interface, as
// `npfctl flow list` sees it plus its generation.
std::optional<dataplane::FlowInfo> flowOnPort(Rig& rig, uint16_t port)
{
    NetnsScope ns(rig.veth().rxNs().path());
    const dataplane::Dataplane dp = dataplane::Dataplane::open(rig.rxIf());
    for (const dataplane::FlowInfo& f : dataplane::listFlows(dp))
        if (f.spec.port == port)
            return f;
    return std::nullopt;
}

// 5. The operator added a flow (npfctl flow add) on a port the client's rule
// allows; the client opens it, or a flow overlapping it: its address under
// the operator's wildcard (XDP looks the exact address up first: it would
// take the datagrams the operator's flow keeps), or a wildcard over the
// operator's address. npfd must refuse (busy), and the operator's flow must
// outlive the client with its id and generation.
enum class Overlap { Same, AddressUnderWildcard, WildcardOverAddress };

::testing::AssertionResult operatorFlow(Rig& rig, Npfd& npfd, uint16_t port, const During& during,
                                        Overlap how = Overlap::Same)
{
    int rc = -1;
    const std::string opAddr = how == Overlap::WildcardOverAddress ? " --addr " + rig.veth().rxAddr() : "";
    const std::string clientAddr = how == Overlap::AddressUnderWildcard ? rig.veth().rxAddr() : "";
    const std::string added = rig.npfctl("flow add " + rig.rxIf() + " " + std::to_string(port) + opAddr, &rc);
    if (rc != 0)
        return ::testing::AssertionFailure() << "npfctl flow add: exit " << rc << " " << added;
    struct Del {
        Rig& rig;
        uint16_t port;
        const std::string addr;
        ~Del() { (void)rig.npfctl("flow del " + rig.rxIf() + " " + std::to_string(port) + addr); }
    } del{rig, port, opAddr};
    const std::optional<dataplane::FlowInfo> before = flowOnPort(rig, port);
    if (!before)
        return ::testing::AssertionFailure() << "npfctl flow list has no flow on port " << port;
    std::string failed;
    {
        Hostile h(npfd, "flow-thief");
        h.region(1 << 20, 1 << 20);
        try {
            HostileFlow f = h.openFlow(port, clientAddr);
            failed = "npfd handed the client the operator's port " + std::to_string(port) + ": flow " +
                     std::to_string(f.id) + " gen " + std::to_string(f.gen) + " (the operator's: flow " +
                     std::to_string(before->id) + " gen " + std::to_string(before->gen) + "). ";
        } catch (const ipc::RemoteError& e) {
            if (e.code() != ErrorCode::Busy)
                failed = "refused with " + std::string(ipc::toString(e.code())) + ", not busy: " + e.message() +
                         ". ";
        }
        during();
        if (auto r = h.leave(); !r)
            return r;
    }
    const std::optional<dataplane::FlowInfo> after = flowOnPort(rig, port);
    if (!after)
        failed += "The operator's flow on port " + std::to_string(port) + " is gone after the client left.";
    else if (after->id != before->id || after->gen != before->gen)
        failed += "The operator's flow is now flow " + std::to_string(after->id) + " gen " +
                  std::to_string(after->gen) + ", was flow " + std::to_string(before->id) + " gen " +
                  std::to_string(before->gen) + ".";
    if (!failed.empty())
        return ::testing::AssertionFailure() << failed;
    return ::testing::AssertionSuccess();
}

// 6. Many connections of one rule, each asking for the rule's whole limits.
// A rule's region_bytes, resident_bytes, flows and connections are totals
// over all the connections it admits: the grants must fit them, the refusals
// be too_large or no_space.
::testing::AssertionResult limitsAreTotals(Npfd& npfd, const RuleLimits& lim, uint16_t firstPort,
                                           const During& during)
{
    constexpr int kConns = 12;
    std::string failed;
    auto refusal = [&](const ipc::RemoteError& e, const char* what) {
        if (e.code() != ErrorCode::TooLarge && e.code() != ErrorCode::NoSpace)
            failed += std::string(what) + " refused with " + std::string(ipc::toString(e.code())) + ". ";
    };
    {
        // The whole region_bytes, from each of 12 connections.
        std::vector<std::unique_ptr<Hostile>> hs;
        uint64_t granted = 0;
        int grants = 0;
        for (int i = 0; i < kConns; i++) {
            hs.push_back(std::make_unique<Hostile>(npfd, "greedy-region-" + std::to_string(i)));
            try {
                hs.back()->region(lim.region, 1 << 20);
                granted += lim.region;
                grants++;
            } catch (const ipc::RemoteError& e) {
                refusal(e, "a region");
            }
        }
        if (granted > lim.region)
            failed += std::to_string(grants) + " connections of the rule got regions of " +
                      std::to_string(lim.region >> 20) + " MiB each: " + std::to_string(granted >> 20) +
                      " MiB, the rule's region_bytes is " + std::to_string(lim.region >> 20) + " MiB. ";
        if (grants == 0)
            failed += "no connection got a region within the limit. ";
        for (auto& h : hs)
            if (auto r = h->leave(); !r)
                return r;
    }
    {
        // 4 MiB regions with 4 MiB budgets, two flows each.
        std::vector<std::unique_ptr<Hostile>> hs;
        uint64_t resident = 0;
        uint32_t flows = 0;
        uint16_t port = firstPort;
        for (int i = 0; i < kConns; i++) {
            hs.push_back(std::make_unique<Hostile>(npfd, "greedy-budget-" + std::to_string(i)));
            try {
                hs.back()->region(4 << 20, 4 << 20);
                resident += 4 << 20;
            } catch (const ipc::RemoteError& e) {
                refusal(e, "a budget");
                continue;
            }
            for (int k = 0; k < 2; k++)
                try {
                    (void)hs.back()->openFlow(port++);
                    flows++;
                } catch (const ipc::RemoteError& e) {
                    refusal(e, "a flow");
                }
        }
        if (resident > lim.resident)
            failed += "the rule's connections got " + std::to_string(resident >> 20) +
                      " MiB of resident budgets, its resident_bytes is " + std::to_string(lim.resident >> 20) +
                      " MiB. ";
        if (flows > lim.flows)
            failed += "the rule's connections opened " + std::to_string(flows) + " flows, its flows is " +
                      std::to_string(lim.flows) + ". ";
        if (flows == 0)
            failed += "no flow opened within the limits. ";
        during();
        for (auto& h : hs)
            if (auto r = h->leave(); !r)
                return r;
    }
    {
        // More connections than the rule admits at once.
        std::vector<HelloAnswer> conns;
        uint32_t ok = 0;
        for (uint32_t i = 0; i < lim.connections + 4; i++) {
            conns.push_back(helloAs(kNobody, npfd.socket()));
            if (conns.back().answer == "ok")
                ok++;
            else if (conns.back().answer != "no_space" || !conns.back().closed)
                failed += "connection " + std::to_string(i) + " beyond the rule's: " + conns.back().answer +
                          (conns.back().closed ? "" : ", left open") + ". ";
        }
        if (ok > lim.connections)
            failed += std::to_string(ok) + " connections of the rule said hello at once, its connections is " +
                      std::to_string(lim.connections) + ". ";
        if (ok == 0)
            failed += "no connection of the rule was admitted. ";
        for (const HelloAnswer& c : conns)
            hangUp(c.fd.get(), test::kDeadline);
    }
    if (!failed.empty())
        return ::testing::AssertionFailure() << failed;
    return ::testing::AssertionSuccess();
}

// ---- one test per attack ---------------------------------------------------------------

class NpfdHostile : public EngineE2E {};

TEST_F(NpfdHostile, ClientMakesItsUserfaultfdBlocking)
{
    underAttack("blocking userfaultfd", {}, [](Rig&, Npfd& npfd, const During& during) {
        return blockingUserfaultfd(npfd, kFirstPort + 1, during);
    });
}

TEST_F(NpfdHostile, ClientBlocksItsNotifierUnderTraffic)
{
    underAttack("blocked notifier, traffic", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        return blockedNotifier(rig, npfd, kFirstPort + 2, false, during);
    });
}

TEST_F(NpfdHostile, ClientBlocksItsNotifierThenClosesTheFlow)
{
    underAttack("blocked notifier, close_flow", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        return blockedNotifier(rig, npfd, kFirstPort + 3, true, during);
    });
}

TEST_F(NpfdHostile, ClientMakesItsSpillAppendOnly)
{
    underAttack("O_APPEND spill", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        return appendOnlySpill(rig, npfd, kFirstPort + 4, during);
    });
}

TEST_F(NpfdHostile, ClientMakesItsRegionMemfdAppendOnly)
{
    underAttack("O_APPEND region memfd", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        return appendOnlyRegion(rig, npfd, kFirstPort + 5, during);
    });
}

// npfd short of descriptors (256), 300 connections held open that never say
// hello, npfd closing them after hello_timeout_ms (1000). The victim is of
// another rule: it connects and receives meanwhile.
TEST_F(NpfdHostile, IdleConnectionsNeverSayHello)
{
    Rig rig;
    TempDir dir;
    auto npfd = std::make_unique<Npfd>(rig, dir,
                                       NpfdOptions{.wrapper = {"prlimit", "--nofile=256:256", "--"},
                                                   .settings = R"("hello_timeout_ms": 1000)",
                                                   .clients = rules()});
    const Footprint base = footprint(*npfd);
    const ::testing::AssertionResult held = attempt("idle connections", [&] {
        return idleFlood(*npfd, 300, [&] {
            EXPECT_TRUE(answersHello(*npfd, false)) << "during the flood";
            EXPECT_TRUE(victimReceives(rig, *npfd, dir, kVictimPort, 12)) << "during the flood";
        });
    });
    EXPECT_TRUE(held) << logTail(*npfd);
    expectRecovered(rig, *npfd, dir, base);
}

TEST_F(NpfdHostile, ClientOpensTheOperatorsFlow)
{
    underAttack("operator's flow", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        return operatorFlow(rig, npfd, kFirstPort + 45, during);
    });
}

TEST_F(NpfdHostile, ClientOpensAnAddressUnderTheOperatorsWildcard)
{
    underAttack("address under the operator's wildcard", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        return operatorFlow(rig, npfd, kFirstPort + 46, during, Overlap::AddressUnderWildcard);
    });
}

TEST_F(NpfdHostile, ClientOpensAWildcardOverTheOperatorsAddress)
{
    underAttack("wildcard over the operator's address", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        return operatorFlow(rig, npfd, kFirstPort + 47, during, Overlap::WildcardOverAddress);
    });
}

// 7. Tenants on addresses of their own (pods): a flow on one address leaves
// the port free on another, and a refusal (the same address, or a wildcard
// over it) names no other client: not its name, pid, uid or pod.
TEST_F(NpfdHostile, APortOnOneAddressLeavesItFreeOnAnotherAndRefusalsNameNoOne)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, NpfdOptions{.clients = rules()});
    const uint16_t port = kFirstPort + 70;
    Hostile a(npfd, "tenant-a-secret"), b(npfd, "tenant-b"), c(npfd, "tenant-c");
    for (Hostile* h : {&a, &b, &c})
        h->region(1 << 20, 1 << 20);
    HostileFlow fa = a.openFlow(port, "198.18.200.1");
    HostileFlow fb = b.openFlow(port, "198.18.200.2");
    EXPECT_NE(fa.id, fb.id);
    for (const std::string& addr : {std::string("198.18.200.1"), std::string("")}) {
        try {
            (void)c.openFlow(port, addr);
            ADD_FAILURE() << "npfd handed tenant c port " << port << " on '" << addr << "', which overlaps a's";
        } catch (const ipc::RemoteError& e) {
            EXPECT_EQ(e.code(), ErrorCode::Busy) << e.message();
            const std::string msg = e.message();
            EXPECT_EQ(msg.find("tenant-a-secret"), std::string::npos) << msg;
            EXPECT_EQ(msg.find("pid"), std::string::npos) << msg;
            EXPECT_EQ(msg.find("uid"), std::string::npos) << msg;
        }
    }
    EXPECT_TRUE(victimReceives(rig, npfd, dir, kVictimPort, 71));
    EXPECT_TRUE(a.leave());
    EXPECT_TRUE(b.leave());
    EXPECT_TRUE(c.leave());
    EXPECT_EQ(npfd.stop(), 0);
}

// A rule of 64 MiB of regions, 16 MiB resident, 4 flows, 16 connections.
TEST_F(NpfdHostile, ManyConnectionsOfOneRuleAskForItsWholeLimits)
{
    const RuleLimits lim{.region = 64 << 20, .resident = 16 << 20, .flows = 4};
    underAttack("limits", lim, [&](Rig&, Npfd& npfd, const During& during) {
        return limitsAreTotals(npfd, lim, kFirstPort + 60, during);
    });
}

// One tenant against npfd's max_connections (24 here): its rule allows 16
// connections, but the two rules and one share for root and the rest divide
// the 24 into shares of 8, so the tenant's ninth is refused (naming the
// share), and the victim's rule connects and receives meanwhile. Pod rules
// are per pod and add up the same way (quota_test.cpp).
TEST_F(NpfdHostile, OneTenantCannotHoldAllOfNpfdsConnections)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, NpfdOptions{.settings = R"("max_connections": 24)", .clients = rules()});
    const Footprint base = footprint(npfd);
    std::vector<HelloAnswer> conns;
    uint32_t ok = 0, share = 0;
    std::string other;
    for (uint32_t i = 0; i < 16; i++) {
        conns.push_back(helloAs(kNobody, npfd.socket()));
        const HelloAnswer& a = conns.back();
        if (a.answer == "ok")
            ok++;
        else if (a.answer == "no_space" && a.closed && a.message.find("share of npfd's max_connections") != std::string::npos)
            share++;
        else
            other += " " + a.answer + ": " + a.message;
    }
    EXPECT_EQ(ok, 8u) << "24 connections shared by 2 rules and root's";
    EXPECT_EQ(share, 8u) << other;
    EXPECT_TRUE(answersHello(npfd)) << "root, while the tenant holds its share";
    EXPECT_TRUE(victimReceives(rig, npfd, dir, kVictimPort, 81)) << "another tenant, while this one holds its share";
    for (const HelloAnswer& c : conns)
        hangUp(c.fd.get(), test::kDeadline);
    conns.clear();
    EXPECT_EQ(helloAs(kNobody, npfd.socket()).answer, "ok") << "the share is free again";
    expectRecovered(rig, npfd, dir, base);
}

// Replies waiting in `fd`'s socket, read now (no wait); -1 if one is not
// an ok reply.
int takeReplies(int fd)
{
    int n = 0;
    for (;;) {
        ipc::RecvResult r = ipc::recvMessage(fd);
        if (r.status != ipc::IoStatus::Ok)
            return n;
        if (ipc::parse(r.message.bytes).type != "ok")
            return -1;
        n++;
    }
}

// The shared control thread (attack 6): 16 connections each send 4
// populates of 8 MiB (an 8 MiB budget in a 32 MiB region: each evicts the
// last) and read no reply. Root's hello is answered while most of them are
// still to come (one request of each client in turn, populates in slices),
// the victim receives meanwhile, and every populate is answered in the end.
TEST_F(NpfdHostile, PopulateFloodDoesNotHoldOtherClientsRequests)
{
    constexpr uint32_t kConns = 16, kEach = 4;
    constexpr uint64_t kWindow = 8 << 20;
    const RuleLimits lim{.region = kConns * 4 * kWindow, .resident = kConns * kWindow, .flows = 4};
    underAttack("populate flood", lim, [&](Rig&, Npfd& npfd, const During& during) {
        std::vector<std::unique_ptr<Hostile>> hs;
        for (uint32_t i = 0; i < kConns; i++) {
            hs.push_back(std::make_unique<Hostile>(npfd, "flood-" + std::to_string(i)));
            hs.back()->region(4 * kWindow, kWindow);
        }
        for (uint32_t k = 0; k < kEach; k++)
            for (auto& h : hs)
                (void)ipc::sendMessage(h->ch.fd(), ipc::PopulateRequest{.offset = k % 4 * kWindow, .len = kWindow}.encode(1000 + k));
        const auto t0 = Clock::now();
        if (auto r = answersHello(npfd); !r)
            return r << " (during the flood)";
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
        std::vector<int> got(kConns, 0);
        bool bad = false;
        auto take = [&] {
            int all = 0;
            for (uint32_t i = 0; i < kConns; i++) {
                const int n = takeReplies(hs[i]->ch.fd());
                bad |= n < 0;
                got[i] += std::max(n, 0);
                all += got[i];
            }
            return all;
        };
        const int answered = take();
        std::printf("root's hello answered in %lld ms, %d of %u populates answered by then\n",
                    static_cast<long long>(took.count()), answered, kConns * kEach);
        if (answered >= int(kConns * kEach))
            return ::testing::AssertionFailure() << "npfd answered all " << kConns * kEach
                                                 << " populates before the hello of a client that came after them ("
                                                 << took.count() << " ms)";
        during();
        if (!test::waitUntil([&] { return take() == int(kConns * kEach) || bad; }, 120s) || bad)
            return ::testing::AssertionFailure() << take() << " of " << kConns * kEach << " populates answered ok"
                                                 << (bad ? " (an error reply among them)" : "");
        for (auto& h : hs)
            if (auto r = h->leave(); !r)
                return r;
        return ::testing::AssertionSuccess();
    });
}

// ---- soak ----------------------------------------------------------------------------

class NpfdHostileSoak : public EngineE2E {};

uint64_t envNumber(const char* name, uint64_t dflt)
{
    const char* v = std::getenv(name);
    return v && *v ? std::stoull(v) : dflt;
}

// For NPF_SOAK_SECONDS (default 180): a random hostile client after another
// (NPF_SOAK_ATTACKS, a comma-separated subset of the names below, narrows the
// mix; NPF_SOAK_SEED fixes it), beside two victims (one cold, one warm) that
// receive a socat stream after another. Every attack must hold, every stream
// arrive byte for byte, npfd recover and stop on SIGTERM.
TEST_F(NpfdHostileSoak, RandomHostileClientsBesideTwoVictims)
{
    if (!std::getenv("NPF_HOSTILE_SOAK"))
        GTEST_SKIP() << "the soak: ctest -L soak (-DNPF_SOAK=ON), or NPF_HOSTILE_SOAK=1";
    const auto seconds = std::chrono::seconds(envNumber("NPF_SOAK_SECONDS", 180));
    const uint64_t seed = envNumber("NPF_SOAK_SEED", uint64_t(std::random_device{}()));
    const RuleLimits lim{.region = 64 << 20, .resident = 16 << 20, .flows = 8};
    Rig rig;
    TempDir dir;
    auto npfd = std::make_unique<Npfd>(rig, dir,
                                       NpfdOptions{.wrapper = {"prlimit", "--nofile=256:256", "--"},
                                                   .settings = R"("hello_timeout_ms": 1000)",
                                                   .clients = rules(lim)});
    const Footprint base = footprint(*npfd);

    // The victims: stream after stream, each on the next of 16 ports of their own.
    std::atomic<bool> done{false};
    std::atomic<uint64_t> streams{0};
    std::mutex mu;
    std::vector<std::string> victimFailures;
    auto victimLoop = [&](uint16_t firstPort, bool cold, uint32_t seedBase) {
        for (uint32_t round = 0; !done; round++) {
            auto r = victimReceives(rig, *npfd, dir, uint16_t(firstPort + round % 16), seedBase + round, cold);
            streams++;
            if (!r) {
                std::lock_guard<std::mutex> lock(mu);
                victimFailures.push_back((cold ? "cold" : "warm") + std::string(" victim, stream ") +
                                         std::to_string(round) + ": " + r.message());
            }
        }
    };
    std::thread cold(victimLoop, kVictimPort, true, 1000);
    std::thread warm(victimLoop, uint16_t(kVictimPort + 20), false, 5000);

    // Half the attacks hold until the victims received another stream.
    std::mt19937_64 rng(seed);
    auto during = [&] {
        if (rng() % 2) {
            const uint64_t s0 = streams;
            (void)test::waitUntil([&] { return streams > s0 || done; }, test::kDeadline, 10ms);
        }
    };
    using Attack = std::function<::testing::AssertionResult()>;
    const std::vector<std::pair<std::string, Attack>> all = {
        {"blocking-uffd", [&] { return blockingUserfaultfd(*npfd, kFirstPort + 1, during); }},
        {"notifier-traffic", [&] { return blockedNotifier(rig, *npfd, kFirstPort + 2, false, during); }},
        {"notifier-close", [&] { return blockedNotifier(rig, *npfd, kFirstPort + 3, true, during); }},
        {"append-spill", [&] { return appendOnlySpill(rig, *npfd, kFirstPort + 4, during); }},
        {"append-region", [&] { return appendOnlyRegion(rig, *npfd, kFirstPort + 5, during); }},
        {"idle-flood", [&] { return idleFlood(*npfd, 300, during); }},
        {"operator-flow", [&] { return operatorFlow(rig, *npfd, kFirstPort + 45, during); }},
        {"limits", [&] { return limitsAreTotals(*npfd, lim, kFirstPort + 60, during); }},
    };
    std::vector<std::pair<std::string, Attack>> mix;
    const std::string only = std::getenv("NPF_SOAK_ATTACKS") ? std::getenv("NPF_SOAK_ATTACKS") : "";
    for (const auto& a : all)
        if (only.empty() || ("," + only + ",").find("," + a.first + ",") != std::string::npos)
            mix.push_back(a);
    ASSERT_FALSE(mix.empty()) << "NPF_SOAK_ATTACKS=" << only << " names no attack";

    std::map<std::string, int> ran, failedRuns;
    const auto end = Clock::now() + seconds;
    bool frozen = false;
    while (Clock::now() < end && !frozen) {
        const auto& [name, attack] = mix[rng() % mix.size()];
        ran[name]++;
        if (auto r = attempt(name.c_str(), attack); !r) {
            failedRuns[name]++;
            ADD_FAILURE() << name << " (attack " << ran[name] << "): " << r.message();
        }
        frozen = !answersHello(*npfd);
    }
    done = true;
    cold.join();
    warm.join();
    std::string summary;
    for (const auto& [name, n] : ran)
        summary += " " + name + "=" + std::to_string(n) +
                   (failedRuns.count(name) ? " (failed " + std::to_string(failedRuns[name]) + ")" : "");
    std::printf("soak: seed %llu, %llu streams received, attacks:%s\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(streams.load()), summary.c_str());
    EXPECT_FALSE(frozen) << "npfd froze (SIGKILLed)\n" << logTail(*npfd);
    EXPECT_TRUE(victimFailures.empty()) << victimFailures.size() << " victim streams failed, first: "
                                        << (victimFailures.empty() ? "" : victimFailures.front());
    if (!frozen)
        expectRecovered(rig, *npfd, dir, base);
}

} // namespace
} // namespace npf::e2e
