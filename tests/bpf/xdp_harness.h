// Runs npf_xdp through bpf_prog_test_run_opts against real maps: a loaded
// skeleton, its mmapable post/cursor/resident maps mapped, real AF_XDP
// sockets for the XSKMAP and a real veth whose RX queues give the packets
// their rx_queue_index.
#pragma once

#include <gtest/gtest.h>

#include <linux/bpf.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/flow_ring.h"
#include "dataplane/skeleton.h"
#include "netns.h"
#include "npf/abi.h"
#include "packet_builder.h"
#include "sys/mmap_area.h"
#include "xsk_pair.h"

namespace npf::test {

using Counters = std::array<uint64_t, NPF_STAT_MAX>;
// One flow id's npf_flow_stats entry: n[s - NPF_STAT_FLOW_FIRST] for enum npf_stat s.
using FlowCounters = std::array<uint64_t, NPF_FLOW_STAT_MAX>;

// "rx_total", "pass_not_ip", ... for messages.
const char* statName(uint32_t stat);
// True for the counters every packet lands in exactly one of.
constexpr bool isOutcome(uint32_t stat) { return stat != NPF_STAT_RX_TOTAL && stat != NPF_STAT_TRUNCATED; }
// True for the counters a flow's npf_flow_stats entry has too (abi.h): the
// outcomes decided once the datagram's flow is found, and truncated.
constexpr bool isFlowStat(uint32_t stat) { return stat >= NPF_STAT_FLOW_FIRST && stat < NPF_STAT_MAX; }
// XDP verdict an outcome counter stands for.
int outcomeVerdict(uint32_t stat);
const char* verdictName(int verdict);

npf_flow_key flowKeyAny(uint16_t port);
npf_flow_key flowKeyV4(const Ipv4Addr& addr, uint16_t port);
npf_flow_key flowKeyV6(const Ipv6Addr& addr, uint16_t port);

struct RunResult {
    int verdict = -1;
    std::vector<uint8_t> out; // data_out: XDP metadata, npf_meta if npf put it in front, the packet
    uint32_t metaLen = 0;     // ctx_out.data - ctx_out.data_meta: XDP metadata (an earlier program's)
    uint32_t npfMetaLen = 0;  // what data grew by in front of the packet: 0 or sizeof(npf_meta)
    uint64_t startNs = 0;     // CLOCK_MONOTONIC around the run
    uint64_t endNs = 0;

    std::optional<npf_meta> meta() const; // the npf_meta in front of the packet
    std::span<const uint8_t> packet() const { return std::span(out).subspan(metaLen + npfMetaLen); }
};

struct HarnessOptions {
    uint64_t regionPages = 1024;
    uint32_t queues = 4;         // skeleton LoadConfig::queues
    int vethQueues = NPF_MAX_QUEUES + 1; // so rx queue NPF_MAX_QUEUES can be tested
};

class XdpHarness {
public:
    explicit XdpHarness(HarnessOptions opt = {});
    ~XdpHarness();
    XdpHarness(const XdpHarness&) = delete;
    XdpHarness& operator=(const XdpHarness&) = delete;

    // Empties flows, posts, cursors (generation 0), resident bitmap and
    // socket slots, and zeroes every npf_flow_stats entry with generation 0.
    // npf_stats is never reset: compare snapshots.
    void reset();

    // A flow entry bound to the harness's region (regionSize = its size in
    // bytes, unless given: 0 leaves the flow without a region). Flow id `id`
    // gets a post ring map and the region's bitmap in npf_rings/npf_regions
    // (ids >= NPF_MAX_FLOWS get none: XDP must refuse them).
    void addFlow(const npf_flow_key& key, uint32_t id, uint32_t gen = 0, std::optional<uint64_t> regionSize = {});
    // Binds flow id `id` to another region's bitmap (nullptr: unbinds it).
    void bindBitmap(uint32_t id, const dataplane::ResidentMap* bitmap);
    void setPost(uint32_t flow, uint64_t seq, uint64_t offset, uint32_t len);
    npf_post post(uint32_t flow, uint64_t seq) const;
    void setCursor(uint32_t flow, uint64_t prod, uint64_t cons);
    // What the dataplane does when it hands flow id `id` to a new flow
    // (dataplane::addFlow): a post ring of generation `gen` (cursors 0, not
    // served), and npf_flow_stats[id] zeroed with generation `gen` on every
    // CPU (dataplane::resetFlowXdpStats). Flow entries are left alone: one of
    // another gen stands for a datagram XDP found before the hand-over.
    void newGeneration(uint32_t id, uint32_t gen);
    npf_cursor cursor(uint32_t flow) const; // all zero for a flow id without a ring
    std::vector<uint32_t> ringIds() const;  // flow ids with a post ring map
    void setResident(uint64_t page, bool resident);
    void setAllResident(bool resident);
    // Puts (or removes) the real primary/backup sockets into queue's slots.
    void setSockets(uint32_t queue, bool primary, bool backup);
    // Chains the XDP program `progFd` behind npf_xdp (npf_next); -1 empties
    // the slot. (The harness loads npf_xdp with LoadConfig::chain: every case
    // runs with the tail call in place, an empty slot passing as without.)
    void chain(int progFd);

    Counters counters() const;
    // npf_flow_stats[id] summed over all CPUs, whatever gen each CPU's copy
    // has: what XDP wrote into the id's entry.
    FlowCounters flowCounters(uint32_t id) const;
    // Every id's (index = flow id, NPF_MAX_FLOWS of them), in one batch read.
    std::vector<FlowCounters> allFlowCounters() const;
    // The gen of npf_flow_stats[id] on every CPU.
    std::vector<uint32_t> flowStatsGens(uint32_t id) const;
    // metaIn: metadata already in front of the packet (ctx_in.data = its length).
    RunResult run(std::span<const uint8_t> pkt, uint32_t queue, std::span<const uint8_t> metaIn = {});

    uint64_t regionPages() const { return regionPages_; }
    uint64_t regionBytes() const { return regionPages() << NPF_PAGE_SHIFT; }
    uint32_t queues() const { return skel_.config().queues; }

private:
    dataplane::Skeleton skel_;
    VethPair veth_;
    int ifindex_ = 0;
    std::unique_ptr<XskPair> xsks_;
    npf_ring& ring(uint32_t flow); // made and installed on first use
    const npf_ring& ringOf(uint32_t flow) const;

    uint64_t regionPages_;
    dataplane::ResidentMap bitmap_;
    std::map<uint32_t, dataplane::FlowRing> rings_;
    std::map<uint32_t, const dataplane::ResidentMap*> bound_; // npf_regions as set
};

// gtest base of a suite that shares one XdpHarness (its veth has
// NPF_MAX_QUEUES + 1 queues: built once per suite, not per test). Tests skip
// without root; a harness that failed to build fails every test with the reason.
template <typename Base, uint64_t RegionPages, uint32_t Queues>
class HarnessSuite : public Base {
protected:
    static void SetUpTestSuite()
    {
        if (!isRoot())
            return;
        try {
            harness_ = std::make_unique<XdpHarness>(
                HarnessOptions{.regionPages = RegionPages, .queues = Queues, .vethQueues = NPF_MAX_QUEUES + 1});
        } catch (const std::exception& e) {
            setupError_ = e.what();
        }
    }
    static void TearDownTestSuite() { harness_.reset(); }
    void SetUp() override
    {
        if (!isRoot())
            GTEST_SKIP() << "needs root (BPF, AF_XDP, netns)";
        ASSERT_TRUE(harness_) << "harness setup failed: " << setupError_;
    }

    static inline std::unique_ptr<XdpHarness> harness_;
    static inline std::string setupError_;
};

} // namespace npf::test
