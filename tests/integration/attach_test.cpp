// attach / status / detach through the real npfctl, checked against what the
// kernel reports (ip link, bpftool) and what bpffs holds.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "fixture.h"
#include "npf/abi.h"

namespace npf::itest {
namespace {

namespace fs = std::filesystem;

const char* const kPins[] = {"npf_flows",     "npf_rings",     "npf_regions_0", "npf_regions_1", "npf_regions_2",
                             "npf_regions_3", "npf_regions_4", "npf_xsks",      "npf_stats"};

nlohmann::json bpftoolJson(Rig& rig, const std::string& args)
{
    RunResult r = rig.inRx("bpftool --json " + args);
    if (r.status != 0)
        throw std::runtime_error("bpftool failed: " + describe(r));
    return nlohmann::json::parse(r.out);
}

using AttachTest = ModeTest;

TEST_P(AttachTest, StatusIpLinkAndPinsShowTheProgram)
{
    RunResult r = rig().npfctl("attach " + ifname() + " --mode " + mode());
    ASSERT_EQ(r.status, kOk) << describe(r);
    EXPECT_TRUE(contains(r.out, "attached npf_xdp to " + ifname() + ": mode " + mode())) << r.out;

    nlohmann::json st = rig().status();
    EXPECT_EQ(st["state"], "attached");
    EXPECT_EQ(st["mode"], mode());
    uint32_t prog = st["prog_id"].get<uint32_t>();
    ASSERT_GT(prog, 0u);
    EXPECT_TRUE(contains(r.out, "prog id " + std::to_string(prog))) << r.out;
    EXPECT_EQ(st["flows"], 0);
    EXPECT_GE(st["queues"].get<int>(), 1);
    EXPECT_EQ(st["regions"], 0) << "no engine has bound a region";
    EXPECT_TRUE(st["bound_queues"].empty()) << st.dump();
    EXPECT_TRUE(st["foreign_programs"].empty()) << st.dump();

    // status without IFACE lists every npf interface of the namespace: this one.
    RunResult all = rig().npfctl("status --json");
    ASSERT_EQ(all.status, kOk) << describe(all);
    nlohmann::json arr = nlohmann::json::parse(all.out);
    ASSERT_EQ(arr.size(), 1u) << all.out;
    EXPECT_EQ(arr[0]["interface"], ifname());
    EXPECT_EQ(arr[0]["prog_id"], prog);

    // The kernel's view: IFLA_XDP of the interface, in the namespace.
    nlohmann::json link = rig().link();
    ASSERT_TRUE(link.contains("xdp")) << link.dump();
    EXPECT_EQ(link["xdp"]["mode"], ipLinkMode());
    EXPECT_EQ(link["xdp"]["prog"]["id"], prog);
    EXPECT_EQ(link["xdp"]["prog"]["name"], "npf_xdp");
    RunResult text = rig().inRx("ip link show dev " + ifname());
    EXPECT_TRUE(contains(text.out, mode() == "native" ? " xdp " : " xdpgeneric ")) << text.out;
    EXPECT_TRUE(contains(text.out, "prog/xdp id " + std::to_string(prog) + " name npf_xdp")) << text.out;

    // The program is pinned too: the attached one.
    nlohmann::json pinned = bpftoolJson(rig(), "prog show pinned " + rig().pinDir() + "/npf_xdp");
    EXPECT_EQ(pinned["id"], prog) << pinned.dump();

    // Every pin is one of the attached program's maps.
    nlohmann::json progInfo = bpftoolJson(rig(), "prog show id " + std::to_string(prog));
    std::vector<uint32_t> mapIds = progInfo["map_ids"].get<std::vector<uint32_t>>();
    for (const char* pin : kPins) {
        fs::path p = fs::path(rig().pinDir()) / pin;
        ASSERT_TRUE(fs::exists(p)) << p;
        nlohmann::json m = bpftoolJson(rig(), "map show pinned " + p.string());
        EXPECT_EQ(m["name"], pin);
        EXPECT_NE(std::find(mapIds.begin(), mapIds.end(), m["id"].get<uint32_t>()), mapIds.end())
            << pin << " (map id " << m["id"] << ") is not a map of prog " << prog;
    }

    RunResult stats = rig().npfctl("stats " + ifname() + " --json");
    ASSERT_EQ(stats.status, kOk) << describe(stats);
    nlohmann::json sj = nlohmann::json::parse(stats.out);
    EXPECT_EQ(sj["prog_id"], prog);
    EXPECT_EQ(sj["mode"], mode());
    EXPECT_EQ(sj["counters"]["xdp"].size(), static_cast<size_t>(NPF_STAT_MAX)) << stats.out;
}

TEST_P(AttachTest, DetachLeavesNoProgramAndNoPins)
{
    ASSERT_EQ(rig().npfctl("attach " + ifname() + " --mode " + mode()).status, kOk);
    uint32_t prog = rig().status()["prog_id"].get<uint32_t>();
    ASSERT_TRUE(fs::exists(rig().pinDir()));

    RunResult r = rig().npfctl("detach " + ifname());
    ASSERT_EQ(r.status, kOk) << describe(r);
    EXPECT_TRUE(contains(r.out, "detached npf_xdp (prog id " + std::to_string(prog) + ") from " + ifname()))
        << r.out;
    EXPECT_FALSE(rig().link().contains("xdp")) << rig().link().dump();
    RunResult text = rig().inRx("ip -d link show dev " + ifname());
    EXPECT_FALSE(contains(text.out, "xdp")) << text.out;
    EXPECT_FALSE(fs::exists(rig().pinDir())) << rig().pinDir();

    nlohmann::json st = rig().status();
    EXPECT_EQ(st["state"], "none");
    EXPECT_EQ(st["prog_id"], 0);

    // Idempotent.
    RunResult again = rig().npfctl("detach " + ifname());
    EXPECT_EQ(again.status, kOk) << describe(again);
    EXPECT_TRUE(contains(again.out, "npf is not attached to " + ifname())) << again.out;
    EXPECT_FALSE(fs::exists(rig().pinDir()));

    // The interface works as before.
    RunResult ping = rig().inTx("ping -c 1 -W 10 " + rig().rxAddr());
    EXPECT_EQ(ping.status, 0) << describe(ping);
}

// The program removed behind npfctl's back (ip link ... off): the pins are
// stale; status says so, attach replaces them, detach removes them.
TEST_P(AttachTest, StalePinsAreReportedAndReplaced)
{
    ASSERT_EQ(rig().npfctl("attach " + ifname() + " --mode " + mode()).status, kOk);
    uint32_t first = rig().status()["prog_id"].get<uint32_t>();
    RunResult off = rig().inRx("ip link set dev " + ifname() + " " + ipXdpFlag() + " off");
    ASSERT_EQ(off.status, 0) << describe(off);
    ASSERT_TRUE(fs::exists(rig().pinDir()));

    nlohmann::json st = rig().status();
    EXPECT_EQ(st["state"], "stale") << st.dump();
    RunResult stats = rig().npfctl("stats " + ifname());
    EXPECT_EQ(stats.status, kConflict) << describe(stats);

    RunResult again = rig().npfctl("attach " + ifname() + " --mode " + mode());
    ASSERT_EQ(again.status, kOk) << describe(again);
    EXPECT_TRUE(contains(again.err, "removed stale pins")) << again.err;
    st = rig().status();
    EXPECT_EQ(st["state"], "attached");
    EXPECT_NE(st["prog_id"], first);
    nlohmann::json progInfo = bpftoolJson(rig(), "prog show id " + std::to_string(st["prog_id"].get<uint32_t>()));
    nlohmann::json stats2 = bpftoolJson(rig(), "map show pinned " + rig().pinDir() + "/npf_stats");
    std::vector<uint32_t> mapIds = progInfo["map_ids"].get<std::vector<uint32_t>>();
    EXPECT_NE(std::find(mapIds.begin(), mapIds.end(), stats2["id"].get<uint32_t>()), mapIds.end())
        << "npf_stats pin is not the new program's map";

    ASSERT_EQ(rig().inRx("ip link set dev " + ifname() + " " + ipXdpFlag() + " off").status, 0);
    RunResult d = rig().npfctl("detach " + ifname());
    EXPECT_EQ(d.status, kOk) << describe(d);
    EXPECT_TRUE(contains(d.out, "removed stale pins")) << d.out;
    EXPECT_FALSE(fs::exists(rig().pinDir()));
}

NPF_INSTANTIATE_MODES(AttachTest);

class AttachSizedTest : public RigTest {
protected:
    test::VethOptions vethOptions() const override { return {.queues = 2}; }
};

TEST_F(AttachSizedTest, QueuesReachTheMaps)
{
    RunResult r = rig().npfctl("attach " + ifname() + " --mode skb --queues 2");
    ASSERT_EQ(r.status, kOk) << describe(r);
    nlohmann::json st = rig().status();
    EXPECT_EQ(st["queues"], 2);

    nlohmann::json xsks = bpftoolJson(rig(), "map show pinned " + rig().pinDir() + "/npf_xsks");
    EXPECT_EQ(xsks["max_entries"], 4);
    for (const char* outer : {"npf_rings", "npf_regions_0", "npf_regions_4"}) {
        nlohmann::json m = bpftoolJson(rig(), std::string("map show pinned ") + rig().pinDir() + "/" + outer);
        EXPECT_EQ(m["type"], "array_of_maps") << outer;
        EXPECT_EQ(m["max_entries"], NPF_MAX_FLOWS) << outer;
    }
}

// stats --watch: one JSON sample per line with rates, until SIGTERM (exit 0).
// The test reads the samples as they come: pings go out after the first one,
// and it waits for the sample that counts them. Nothing depends on how long
// a sample takes.
TEST_F(AttachSizedTest, StatsWatchPrintsRatesUntilSigterm)
{
    ASSERT_EQ(rig().npfctl("attach " + ifname() + " --mode skb").status, kOk);
    Streaming watch({"nsenter", "--net=" + rig().veth().rxNs().path(), NPFCTL_PATH, "stats", ifname(), "--json",
                     "--watch", "0.3"});

    // Checks one sample line; returns its pass_not_udp (or nullopt after a failure).
    std::optional<uint64_t> last;
    auto sample = [&](const std::string& line) -> std::optional<uint64_t> {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
        if (j.is_discarded())
            return std::nullopt;
        EXPECT_EQ(j["interface"], ifname());
        const double interval = j["interval"].get<double>();
        EXPECT_GT(interval, 0.0) << line;
        EXPECT_EQ(j["rates"]["xdp"].size(), static_cast<size_t>(NPF_STAT_MAX)) << line;
        const uint64_t notUdp = j["counters"]["xdp"]["pass_not_udp"].get<uint64_t>();
        const double rate = j["rates"]["xdp"]["pass_not_udp"].get<double>();
        if (last) {
            EXPECT_GE(notUdp, *last) << "counters went backwards: " << line;
            // The rate is the growth since the previous sample over the interval.
            EXPECT_NEAR(rate * interval, static_cast<double>(notUdp - *last), 1e-6 * static_cast<double>(notUdp) + 1e-6)
                << line;
        }
        last = notUdp;
        return notUdp;
    };

    std::optional<std::string> line = watch.readLine();
    ASSERT_TRUE(line) << "no first sample; stderr: " << watch.err();
    std::optional<uint64_t> first = sample(*line);
    ASSERT_TRUE(first);

    RunResult ping = rig().inTx("ping -c 3 -i 0.2 -W 10 " + rig().rxAddr());
    ASSERT_EQ(ping.status, 0) << describe(ping);
    // Each echo request passes XDP as not UDP before it is answered: the
    // next samples count all three, and one of them shows a rate.
    int samples = 1;
    bool sawRate = false;
    while (*last < *first + 3) {
        line = watch.readLine();
        ASSERT_TRUE(line) << samples << " samples, pass_not_udp " << *last << ", none counts the 3 pings; stderr: "
                          << watch.err();
        const double before = static_cast<double>(*last);
        ASSERT_TRUE(sample(*line));
        sawRate |= static_cast<double>(*last) > before;
        samples++;
    }
    EXPECT_TRUE(sawRate);

    watch.signal(SIGTERM);
    RunResult r = watch.finish();
    EXPECT_EQ(r.status, kOk) << describe(r);
    // A sample printed before the signal arrived is still well formed.
    std::istringstream rest(r.out);
    for (std::string l; std::getline(rest, l);)
        sample(l);
}

} // namespace
} // namespace npf::itest
