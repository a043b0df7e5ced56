// Flow ids across processes: concurrent `npfctl flow add/del` never hand one
// id to two flows, and a datagram of another flow never lands in an engine
// flow's buffers, even when that flow's id is freed and reused under it.
#include <bpf/bpf.h>
#include <atomic>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "dataplane/dataplane.h"
#include "dataplane/flow_ring.h"
#include "dataplane/flows.h"
#include "engine_fixture.h"
#include "sys/fd.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

// Runs `npfctl ARGS PORT` for every port at once in the rx namespace;
// returns port -> exit status.
std::map<uint16_t, int> inParallel(Rig& rig, const std::string& args, uint16_t first, uint16_t count)
{
    std::string script = "for p in $(seq " + std::to_string(first) + " " + std::to_string(first + count - 1) +
                         "); do (" NPFCTL_PATH " " + args + " $p >/dev/null 2>&1; echo $p $?) & done; wait";
    std::istringstream in(test::shOut(rig.veth().rxNs().exec() + "sh -c '" + script + "'"));
    std::map<uint16_t, int> out;
    uint16_t port;
    int status;
    while (in >> port >> status)
        out[port] = status;
    return out;
}

// `npfctl flow list --json`: port -> id; fails the test on a shared id.
std::map<uint16_t, uint32_t> flowIds(Rig& rig)
{
    int rc = -1;
    std::string out = rig.npfctl("flow list " + rig.rxIf() + " --json", &rc);
    EXPECT_EQ(rc, 0) << out;
    std::map<uint16_t, uint32_t> ids;
    std::set<uint32_t> seen;
    const nlohmann::json list = nlohmann::json::parse(out);
    for (const auto& f : list["flows"]) {
        const uint32_t id = f["id"];
        EXPECT_TRUE(seen.insert(id).second) << "flow id " << id << " given to two flows: " << out;
        ids[f["port"].get<uint16_t>()] = id;
    }
    return ids;
}

size_t countStatus(const std::map<uint16_t, int>& r, int status)
{
    size_t n = 0;
    for (const auto& [port, st] : r)
        n += st == status;
    return n;
}

TEST_F(EngineE2E, ParallelFlowAddsAndDeletesNeverShareAnId)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    eng->openFlow(7300); // the engine takes its id under the same lock
    // Most ids go to flows added here, one after another: the race is for
    // the last kFree. (Each add installs a post ring map, which waits for
    // an RCU grace period: a thousand racing processes would take minutes.)
    constexpr uint16_t kFree = 40;
    constexpr uint16_t kPrefill = NPF_MAX_FLOWS - 1 - kFree;
    {
        test::NetnsGuard in(rig.veth().rxNs());
        dataplane::Dataplane dp = dataplane::Dataplane::open(rig.rxIf());
        for (uint16_t i = 0; i < kPrefill; i++)
            dataplane::addFlow(dp, dataplane::parseFlowSpec(std::to_string(20000 + i)));
    }
    const uint16_t free = kFree;
    for (int rep = 0; rep < 4; rep++) {
        SCOPED_TRACE("repetition " + std::to_string(rep));
        // More adders than free ids: every id goes to exactly one of them,
        // the rest are refused as a state conflict (exit 5).
        std::map<uint16_t, int> added = inParallel(rig, "flow add " + rig.rxIf(), 9000, free + 8);
        ASSERT_EQ(added.size(), free + 8u);
        EXPECT_EQ(countStatus(added, 0), free);
        EXPECT_EQ(countStatus(added, 5), 8u);
        std::map<uint16_t, uint32_t> ids = flowIds(rig);
        EXPECT_EQ(ids.size(), kPrefill + free + 1u);
        for (const auto& [port, st] : added)
            EXPECT_EQ(ids.count(port), st == 0 ? 1u : 0u) << "port " << port << " exit " << st;

        // Deleters and adders at once: the freed ids go to the new ports.
        std::vector<uint16_t> winners;
        for (const auto& [port, st] : added)
            if (st == 0 && winners.size() < 12)
                winners.push_back(port);
        std::string dels;
        for (uint16_t p : winners)
            dels += " " + std::to_string(p);
        std::thread deleter([&] {
            test::sh(rig.veth().rxNs().exec() + "sh -c 'for p in" + dels + "; do " NPFCTL_PATH " flow del " +
                     rig.rxIf() + " $p >/dev/null 2>&1 & done; wait'");
        });
        std::map<uint16_t, int> more = inParallel(rig, "flow add " + rig.rxIf(), 9100, 12);
        deleter.join();
        ids = flowIds(rig);
        for (uint16_t p : winners)
            EXPECT_EQ(ids.count(p), 0u) << "deleted port " << p << " still listed";
        for (const auto& [port, st] : more)
            EXPECT_EQ(ids.count(port), st == 0 ? 1u : 0u) << "port " << port << " exit " << st;
        EXPECT_EQ(ids.count(7300), 1u);

        for (const auto& [port, id] : ids)
            if (port != 7300 && port < 20000)
                rig.npfctl("flow del " + rig.rxIf() + " " + std::to_string(port));
        EXPECT_EQ(flowIds(rig).size(), kPrefill + 1u);
    }
}

uint32_t fixedSize(uint32_t) { return 600; }

// The engine's flow entry is deleted behind its back and the id handed to
// another port. The new flow has a post ring of its own: the engine's posts
// stay in the old one, and the port's datagrams pass to the kernel (no region
// bound). Then something serves the new flow through the engine's sockets
// (forged here: a region, posts, SERVED): its datagrams carry the new
// generation in their metadata, and the engine must refuse every one of
// them; none may complete in its flow.
TEST_F(EngineE2E, DatagramOfAFlowThatReusedTheIdNeverLandsInOurBuffers)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& ours = eng->openFlow(7301);
    Checker chk(*eng, ours, {.stride = 2048, .depth = 512}, fixedSize);
    chk.postInitial();
    ASSERT_TRUE(rig.npfctlOk("flow del " + rig.rxIf() + " 7301"));
    int rc = -1;
    std::string out = rig.npfctl("flow add " + rig.rxIf() + " 7302", &rc);
    ASSERT_EQ(rc, 0) << out;
    ASSERT_EQ(flowIds(rig)[7302], ours.id()) << "the test needs the freed id reused";
    for (uint32_t i = 0; i < 2 * Flow::kPostBurst; i++)
        ASSERT_TRUE(ours.post(eng->regionSize() - (i + 1) * 2048, 2048));
    ours.flush();
    const std::string pins = rig.pinDir();
    Fd rings(bpf_obj_get((pins + "/npf_rings").c_str()));
    dataplane::ResidentMap bitmap = dataplane::ResidentMap::create(eng->regionSize() / NPF_PAGE_SIZE);
    Fd regions(bpf_obj_get((pins + "/npf_regions_" + std::to_string(bitmap.sizeClass())).c_str()));
    Fd flows(bpf_obj_get((pins + "/npf_flows").c_str()));
    ASSERT_TRUE(rings && regions && flows) << strerror(errno);
    const uint32_t id = ours.id();
    uint32_t ringId = 0;
    ASSERT_EQ(bpf_map_lookup_elem(rings.get(), &id, &ringId), 0);
    dataplane::FlowRing theirs = dataplane::FlowRing::adopt(Fd(bpf_map_get_fd_by_id(ringId)));
    EXPECT_EQ(theirs.cursor()->prod, 0u) << "our posts reached the ring of the flow that reused the id";

    constexpr uint32_t kCount = 200;
    auto send = [&](uint32_t sender) {
        return sendDatagrams(rig.veth(), {.sender = sender, .count = kCount, .dstPort = 7302, .size = fixedSize});
    };
    Counters xdp0 = rig.xdp();
    uint64_t veth0 = rig.vethDrops();
    ASSERT_EQ(send(2), "");
    Counters d;
    ASSERT_TRUE(test::waitUntil([&] {
        d = delta(rig.xdp(), xdp0);
        return d["rx_total"] + rig.vethDrops() - veth0 >= kCount;
    })) << describe(d);
    EXPECT_EQ(d["redir_primary"] + d["redir_backup"], 0u) << describe(d);
    EXPECT_EQ(d["pass_no_socket"], d["rx_total"]) << describe(d);

    // Serve the new flow through the engine's sockets, as a second engine
    // sharing them would: a region of its own, posts, SERVED.
    std::memset(bitmap.words(), 0xff, bitmap.wordCount() * sizeof(uint64_t));
    const int bitmapFd = bitmap.fd();
    ASSERT_EQ(bpf_map_update_elem(regions.get(), &id, &bitmapFd, BPF_ANY), 0) << strerror(errno);
    const npf_flow_key key = dataplane::toKey(dataplane::parseFlowSpec("7302"));
    npf_flow entry{};
    ASSERT_EQ(bpf_map_lookup_elem(flows.get(), &key, &entry), 0);
    entry.region_size = eng->regionSize();
    ASSERT_EQ(bpf_map_update_elem(flows.get(), &key, &entry, BPF_EXIST), 0) << strerror(errno);
    for (uint32_t i = 0; i < 2 * Flow::kPostBurst; i++)
        theirs.posts()[i] = npf_post{.offset = eng->regionSize() - (i + 1) * 2048, .len = 2048, .pad = 0};
    theirs.cursor()->flags |= NPF_CURSOR_F_SERVED;
    std::atomic_ref<__u64>(theirs.cursor()->prod).store(2 * Flow::kPostBurst, std::memory_order_release);

    const uint64_t rejected0 = eng->stats().rejected;
    xdp0 = rig.xdp();
    veth0 = rig.vethDrops();
    // 2 x kPostBurst posts, at most, can take these: no flow control needed.
    ASSERT_EQ(send(1), "");
    // Every datagram sent has been through XDP (or dropped before it).
    ASSERT_TRUE(test::waitUntil([&] {
        d = delta(rig.xdp(), xdp0);
        return d["rx_total"] + rig.vethDrops() - veth0 >= kCount;
    })) << describe(d);
    // Every datagram XDP steered into our ring is refused by the engine.
    const uint64_t steered = d["redir_primary"] + d["redir_backup"];
    EXPECT_GT(steered, 0u) << "the reused id took none of our buffers: the test proves nothing";
    EXPECT_TRUE(test::waitUntil([&] { return eng->stats().rejected - rejected0 >= steered; }));
    EXPECT_EQ(eng->stats().rejected - rejected0, steered);
    // The engine is through with all of them: whatever completes, completed by now.
    chk.pumpReady();
    const CheckTotals& t = chk.totals();
    EXPECT_EQ(t.failures, 0u) << t.firstFailures;
    EXPECT_EQ(t.ok + t.truncated, 0u) << "a datagram of port 7302 completed in the flow of port 7301";
    for (const auto& [id, n] : chk.ids())
        ADD_FAILURE() << "datagram " << id << " of port 7302 placed in the buffers of port 7301";
}

// A node serves more flows than a 64-bit mask has bits: an engine with 70
// flows receives on the one with the highest id, bit-exact, in order (the
// worker publishes every flow it completed in a batch, whatever its id).
TEST_F(EngineE2E, FlowWithIdAboveSixtyFourReceives)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow* last = nullptr;
    for (uint16_t i = 0; i < 70; i++)
        last = &eng->openFlow(static_cast<uint16_t>(7400 + i));
    ASSERT_GE(last->id(), 64u);
    const uint32_t count = 2000;
    Checker chk(*eng, *last, {.stride = 2048, .depth = 512}, fixedSize);
    chk.postInitial();
    Stream tx(rig, chk, {.count = count, .dstPort = last->port(), .size = fixedSize});
    ASSERT_EQ(tx.run(), "");
    EXPECT_TRUE(cleanInOrder(chk));
    EXPECT_EQ(chk.totals().ok, count);
}

} // namespace
} // namespace npf::e2e
