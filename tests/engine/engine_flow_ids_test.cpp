// Flow ids across processes: concurrent `npfctl flow add/del` never hand one
// id to two flows, and a datagram of another flow never lands in an engine
// flow's buffers, even when that flow's id is freed and reused under it.
#include <bpf/bpf.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

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
    const uint16_t free = NPF_MAX_FLOWS - 1;
    for (int rep = 0; rep < 4; rep++) {
        SCOPED_TRACE("repetition " + std::to_string(rep));
        // More adders than free ids: every id goes to exactly one of them,
        // the rest are refused as a state conflict (exit 5).
        std::map<uint16_t, int> added = inParallel(rig, "flow add " + rig.rxIf(), 9000, free + 8);
        ASSERT_EQ(added.size(), free + 8u);
        EXPECT_EQ(countStatus(added, 0), free);
        EXPECT_EQ(countStatus(added, 5), 8u);
        std::map<uint16_t, uint32_t> ids = flowIds(rig);
        EXPECT_EQ(ids.size(), free + 1u);
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
            if (port != 7300)
                rig.npfctl("flow del " + rig.rxIf() + " " + std::to_string(port));
        EXPECT_EQ(flowIds(rig).size(), 1u);
    }
}

uint32_t fixedSize(uint32_t) { return 600; }

// The engine's flow entry is deleted behind its back and the id handed to
// another port: that port's datagrams now claim the engine flow's posted
// buffers in XDP, and carry the new generation in their metadata. The engine
// must refuse every one of them; none may complete in its flow.
TEST_F(EngineE2E, DatagramOfAFlowThatReusedTheIdNeverLandsInOurBuffers)
{
    Rig rig;
    EngineInNs eng(rig, {.regionSize = 16ull << 20});
    Flow& ours = eng->openFlow(7301);
    Checker chk(*eng, ours, {.stride = 2048, .depth = 512}, fixedSize);
    chk.postInitial();
    int rc = -1;
    rig.npfctl("flow del " + rig.rxIf() + " 7301", &rc);
    ASSERT_EQ(rc, 0);
    std::string out = rig.npfctl("flow add " + rig.rxIf() + " 7302", &rc);
    ASSERT_EQ(rc, 0) << out;
    ASSERT_EQ(flowIds(rig)[7302], ours.id()) << "the test needs the freed id reused";
    // The new flow's cursors were reset: posts published from now on (the
    // application does not know) are what XDP hands the other port, once
    // something serves it (as an engine serving port 7302 would mark it).
    for (uint32_t i = 0; i < 2 * Flow::kPostBurst; i++)
        ASSERT_TRUE(ours.post(eng->regionSize() - (i + 1) * 2048, 2048));
    ours.flush();
    {
        Fd cursors(bpf_obj_get((test::pinDirOf(rig.veth().rxNs(), rig.rxIf()) + "/npf_cursors").c_str()));
        ASSERT_TRUE(cursors) << strerror(errno);
        const uint32_t id = ours.id();
        npf_cursor c{};
        ASSERT_EQ(bpf_map_lookup_elem(cursors.get(), &id, &c), 0);
        c.flags |= NPF_CURSOR_F_SERVED;
        ASSERT_EQ(bpf_map_update_elem(cursors.get(), &id, &c, BPF_ANY), 0);
    }

    constexpr uint32_t kCount = 200;
    const uint64_t rejected0 = eng->stats().rejected;
    Counters xdp0 = rig.xdp();
    const uint64_t veth0 = rig.vethDrops();
    // 2 x kPostBurst posts, at most, can take these: no flow control needed.
    Sender tx(rig.veth(), {.sender = 1, .count = kCount, .dstPort = 7302, .size = fixedSize});
    tx.start();
    tx.join();
    ASSERT_EQ(tx.error(), "");
    // Every datagram sent has been through XDP (or dropped before it).
    Counters d;
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

} // namespace
} // namespace npf::e2e
