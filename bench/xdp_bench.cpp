// What npf_xdp costs per packet, by flow count and path: the kernel's own
// timing of bpf_prog_test_run_opts (mean ns per run over `repeat` test runs,
// one packet each, of one prebuilt 64-byte-payload UDP/IPv4 frame), as it
// runs on a real veth with real primary and backup AF_XDP sockets in
// npf_xsks (without them the program fails open before it reaches the post
// ring).
//
// Configurations: F flows in npf_flows (F = 1, 32, 1024 as NPF_MAX_FLOWS
// allows), each with its post ring and all sharing one 64 MiB region's
// bitmap; the frame goes to the flow added last (the hash holds F entries).
//   primary  every page resident: redir_primary
//   backup   no page resident: redir_backup
//   no flow  UDP to a port that is not a flow: parse + two hash misses
//   bare     a two-instruction XDP_PASS program: the test-run loop's own cost
//   redirect a bare redirect (bpf_redirect_map to queue 0's primary socket,
//            as the static-pinned contender's program does after its
//            parse): what any AF_XDP receiver pays; npf_xdp's own cost is
//            the steered paths minus this
// A call claims `repeat` posts (the ring holds NPF_POST_RING_SIZE); the
// flow's cursor is re-armed (cons 0, prod repeat, SERVED) before each call.
// Rounds interleave the configurations (drift on a shared machine hits all
// alike); the table shows median, p10 and p90 over all calls. Every call's
// verdict and every block's counters are checked against the expected
// outcome: a configuration that measured another path fails the run. From
// ABI 4 on, so is the flow's own counter (npf_flow_stats of the flow the
// frame goes to, of its generation): every steered packet counts there too,
// a no-flow packet nowhere (a --baseline object's are shown, not checked).
//
// --baseline OBJ also runs the npf_xdp of an object file (another build's
// build/bpf/npf_xdp.bpf.o, same ABI) on the same maps, as configurations of
// its own in the same rounds, and prints each steered path's cost over the
// baseline's: a change to the program is compared side by side, in one run.
//
// The ABI 2 comparison in docs/BENCHMARKS.md was made with this file as of
// commit c7d489d, which also built against ABI 2 (the flat maps).
//
// Usage: npf-xdp-bench [--calls N] [--repeat N] [--rounds N] [--flows LIST] [--baseline OBJ] [--cpu N]
//                      [--json FILE]
// Prints a table, then one JSON line. Root (BPF, AF_XDP, netns).
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <sys/utsname.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/version.h"
#include "dataplane/flow_ring.h"
#include "dataplane/skeleton.h"
#include "dataplane/stats.h"
#include "generator.h"
#include "npf/abi.h"
#include "report.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"
#include "topology.h"
#include "xsk/socket.h"
#include "xsk/umem.h"

namespace {

using npf::checkErrno;
using npf::checkNeg;
using npf::Fd;
using npf::MmapArea;
using npf::monotonicNs;
using npf::throwErrno;
using Json = nlohmann::ordered_json;
using XdpStats = npf::dataplane::XdpStats;

constexpr uint64_t kRegionPages = (64ull << 20) >> NPF_PAGE_SHIFT;
constexpr uint32_t kPostLen = 2048;      // posted buffer: room for the payload, one page
constexpr uint16_t kPortBase = 20000;    // flow id i listens on kPortBase + i
constexpr uint16_t kNoFlowPort = kPortBase - 1;

std::atomic<bool> g_stop{false};
void onSignal(int) { g_stop.store(true); }

// ---- flow state, per ABI ----------------------------------------------------

// Post s of every ring: its own page (s * 4 KiB, inside the 64 MiB region).
void fillPosts(npf_post* posts)
{
    for (uint32_t s = 0; s < NPF_POST_RING_SIZE; s++)
        posts[s] = npf_post{.offset = uint64_t(s) << NPF_PAGE_SHIFT, .len = kPostLen, .pad = 0};
}

// The per-flow state npf_xdp reads per packet, for flow ids 0 .. n-1, every
// post of a ring pointing at its own page of one 64 MiB region.
// Each id has its own post ring map in npf_rings; npf_regions_<class> binds
// every id to one shared resident bitmap.
class FlowState {
public:
    explicit FlowState(npf::dataplane::Skeleton& skel)
        : skel_(skel), bitmap_(npf::dataplane::ResidentMap::create(kRegionPages))
    {
    }

    static npf::dataplane::LoadConfig loadConfig() { return {.queues = 1}; }

    // Array-of-maps updates wait for an RCU grace period each: made once.
    void ensure(uint32_t n)
    {
        const int ringsFd = bpf_map__fd(skel_->maps.npf_rings), regionsFd = skel_.regionsFd(bitmap_.sizeClass());
        const int bitmapFd = bitmap_.fd();
        for (uint32_t id = uint32_t(rings_.size()); id < n; id++) {
            auto r = npf::dataplane::FlowRing::create(0, NPF_CURSOR_F_SERVED);
            fillPosts(r.posts());
            const int fd = r.fd();
            checkErrno(bpf_map_update_elem(ringsFd, &id, &fd, BPF_ANY),
                       "install the post ring of flow id " + std::to_string(id));
            checkErrno(bpf_map_update_elem(regionsFd, &id, &bitmapFd, BPF_ANY),
                       "bind the bitmap to flow id " + std::to_string(id));
            rings_.push_back(std::move(r));
        }
    }
    npf_flow flow(uint32_t id) const { return {.id = id, .gen = 0, .region_size = kRegionPages << NPF_PAGE_SHIFT}; }
    npf_cursor& cursor(uint32_t id) { return *rings_.at(id).cursor(); }
    void setAllResident(bool on)
    {
        std::memset(bitmap_.words(), on ? 0xff : 0, bitmap_.wordCount() * sizeof(uint64_t));
    }

private:
    npf::dataplane::Skeleton& skel_;
    npf::dataplane::ResidentMap bitmap_;
    std::vector<npf::dataplane::FlowRing> rings_; // index = flow id
};

// ---- kernel handles ----------------------------------------------------------

// A spare veth pair, down, in the current namespace. A program that is not in
// the kernel's XDP dispatcher is added to it and removed again around every
// test run, each time with a synchronize_rcu() (~25 ms on this VM): attached
// here, the programs stay in it (see bench/generator.cpp's anchor).
class AnchorVeth {
public:
    AnchorVeth() : a_(npf::topology::uniqueName("npfxa")), b_(a_ + "p")
    {
        if (b_.size() > 15)
            b_ = b_.substr(b_.size() - 15);
        if (npf::topology::sh("ip link add " + a_ + " type veth peer name " + b_) != 0)
            throw std::runtime_error("ip link add " + a_ + " type veth peer name " + b_ + " failed");
    }
    ~AnchorVeth() { npf::topology::sh("ip link del " + a_ + " 2>/dev/null"); }
    AnchorVeth(const AnchorVeth&) = delete;
    AnchorVeth& operator=(const AnchorVeth&) = delete;
    const std::string& a() const { return a_; }
    const std::string& b() const { return b_; }

private:
    std::string a_, b_;
};

// A program attached natively to an interface until destruction.
class XdpAttachment {
public:
    XdpAttachment(const std::string& ifname, int progFd, const std::string& prog)
        : ifindex_(int(if_nametoindex(ifname.c_str())))
    {
        if (!ifindex_)
            throwErrno("find interface " + ifname);
        checkNeg(bpf_xdp_attach(ifindex_, progFd, XDP_FLAGS_DRV_MODE, nullptr),
                 "attach " + prog + " to " + ifname + " (native)");
    }
    ~XdpAttachment() { bpf_xdp_detach(ifindex_, XDP_FLAGS_DRV_MODE, nullptr); }
    XdpAttachment(const XdpAttachment&) = delete;
    XdpAttachment& operator=(const XdpAttachment&) = delete;

private:
    int ifindex_;
};

// return XDP_PASS: what a test run costs with (next to) no program.
Fd loadBarePass()
{
    const bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = XDP_PASS},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    Fd fd(bpf_prog_load(BPF_PROG_TYPE_XDP, "npfb_pass", "GPL", insns, 2, nullptr));
    if (!fd)
        throwErrno("load the bare XDP_PASS program");
    return fd;
}

// return bpf_redirect_map(xskmap, slot, XDP_PASS): the redirect alone.
Fd loadBareRedirect(int xskmapFd, uint32_t slot)
{
    const bpf_insn insns[] = {
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD, .off = 0,
         .imm = xskmapFd},
        {.code = 0, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_2, .src_reg = 0, .off = 0, .imm = int32_t(slot)},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_3, .src_reg = 0, .off = 0, .imm = XDP_PASS},
        {.code = BPF_JMP | BPF_CALL, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = BPF_FUNC_redirect_map},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    Fd fd(bpf_prog_load(BPF_PROG_TYPE_XDP, "npfb_redirect", "GPL", insns, 6, nullptr));
    if (!fd)
        throwErrno("load the bare redirect program");
    return fd;
}

// Queue 0's primary and backup AF_XDP sockets on one UMEM, as npf binds them
// (copy mode; the backup shares the UMEM). Members close in reverse: the
// sockets before the UMEM.
struct XskPair {
    XskPair(const std::string& ifname, int xskmapFd)
    {
        const uint32_t ifindex = if_nametoindex(ifname.c_str());
        if (!ifindex)
            throwErrno("find interface " + ifname);
        npf::xsk::UmemConfig uc;
        uc.frameCount = 64;
        Fd fd = npf::xsk::openXskSocket("primary xsk");
        umem = std::make_unique<npf::xsk::Umem>(fd.get(), uc, ifname + " queue 0");
        primary = npf::xsk::XskSocket::bindOwner(std::move(fd), ifindex, 0, 64, npf::xsk::BindMode::Copy, false,
                                                 false, 1000, "primary xsk");
        backup = npf::xsk::XskSocket::bindShared(primary, ifindex, 0, 64, "backup xsk");
        primary.insertInto(xskmapFd, NPF_XSK_PRIMARY(0));
        backup.insertInto(xskmapFd, NPF_XSK_BACKUP(0));
    }
    XskPair(const XskPair&) = delete;
    XskPair& operator=(const XskPair&) = delete;

    std::unique_ptr<npf::xsk::Umem> umem;
    npf::xsk::XskSocket primary, backup;
};

struct BpfObjectClose {
    void operator()(bpf_object* o) const noexcept { bpf_object__close(o); }
};
using BpfObject = std::unique_ptr<bpf_object, BpfObjectClose>;

// The npf_xdp of the object file at `path`, loaded with every map of its own
// replaced by `skel`'s map of that name: it runs on the same flows, rings and
// sockets, and counts into the same npf_stats.
BpfObject loadBaseline(const std::string& path, npf::dataplane::Skeleton& skel)
{
    BpfObject obj(bpf_object__open_file(path.c_str(), nullptr));
    if (!obj)
        throwErrno("open BPF object " + path);
    bpf_map* m = nullptr;
    bpf_object__for_each_map(m, obj.get())
    {
        if (bpf_map__is_internal(m))
            continue;
        const bpf_map* mine = bpf_object__find_map_by_name(skel->obj, bpf_map__name(m));
        if (!mine)
            throwErrno(EINVAL, path + ": map " + bpf_map__name(m) + " is not one of npf_xdp's");
        checkNeg(bpf_map__reuse_fd(m, bpf_map__fd(mine)), path + ": share map " + bpf_map__name(m));
    }
    // Loaded as this build's npf_xdp was (frags, attach type): the maps it
    // shares include the program array npf_next, which takes one kind only.
    bpf_program* prog = bpf_object__find_program_by_name(obj.get(), "npf_xdp");
    if (!prog)
        throwErrno(EINVAL, path + " has no program npf_xdp");
    checkNeg(bpf_program__set_flags(prog, bpf_program__flags(skel->progs.npf_xdp)), path + ": npf_xdp's flags");
    checkNeg(bpf_program__set_expected_attach_type(prog, bpf_program__expected_attach_type(skel->progs.npf_xdp)),
             path + ": npf_xdp's attach type");
    checkNeg(bpf_object__load(obj.get()), "load " + path + " (-v: the verifier's log)");
    return obj;
}

#if NPF_ABI_VERSION >= 4
// npf_flow_stats[id] summed over all CPUs (the entries' gen is the flows' 0).
npf::dataplane::FlowXdpStats readFlowStats(int fd, uint32_t id)
{
    const int ncpu = checkNeg(libbpf_num_possible_cpus(), "count possible CPUs");
    std::vector<npf_flow_stats> per(static_cast<size_t>(ncpu));
    checkErrno(bpf_map_lookup_elem(fd, &id, per.data()), "read npf_flow_stats[" + std::to_string(id) + "]");
    npf::dataplane::FlowXdpStats sum{};
    for (const npf_flow_stats& v : per)
        for (size_t i = 0; i < sum.size(); i++)
            sum[i] += v.n[i];
    return sum;
}
#endif

XdpStats readStats(int fd)
{
    const int ncpu = checkNeg(libbpf_num_possible_cpus(), "count possible CPUs");
    std::vector<uint64_t> per(size_t(ncpu), 0);
    XdpStats sum{};
    for (uint32_t k = 0; k < NPF_STAT_MAX; k++) {
        checkErrno(bpf_map_lookup_elem(fd, &k, per.data()),
                   std::string("read npf_stats ") + npf::dataplane::kStatNames[k]);
        for (uint64_t v : per)
            sum[k] += v;
    }
    return sum;
}

// ---- configurations ---------------------------------------------------------

enum class Path { Bare, Redirect, NoFlow, Primary, Backup };

const char* pathName(Path p)
{
    switch (p) {
    case Path::Bare: return "bare";
    case Path::Redirect: return "redirect";
    case Path::NoFlow: return "no flow";
    case Path::Primary: return "primary";
    case Path::Backup: return "backup";
    }
    return "?";
}

int expectedVerdict(Path p)
{
    return p == Path::Primary || p == Path::Backup || p == Path::Redirect ? XDP_REDIRECT : XDP_PASS;
}

// The outcome counter every packet of the path must land in (-1: not npf_xdp).
int expectedStat(Path p)
{
    switch (p) {
    case Path::Bare:
    case Path::Redirect: return -1;
    case Path::NoFlow: return NPF_STAT_PASS_NO_FLOW;
    case Path::Primary: return NPF_STAT_REDIR_PRIMARY;
    case Path::Backup: return NPF_STAT_REDIR_BACKUP;
    }
    return -1;
}

struct Config {
    uint32_t flows; // 0 for bare and redirect
    Path path;
    std::vector<double> kernelNs, wallNs; // per call: ns per run
    std::set<int> verdicts;
    XdpStats moved{};
    XdpStats flowMoved{}; // ABI >= 4: the flow's npf_flow_stats entry, by enum npf_stat
    bool baseline = false; // the --baseline object's npf_xdp

    std::string name() const
    {
        if (path == Path::Bare)
            return "bare XDP_PASS";
        if (path == Path::Redirect)
            return "bare redirect";
        return (baseline ? "baseline " : "") + std::to_string(flows) + " flows, " + pathName(path);
    }
};

double quantile(std::vector<double> v, double q)
{
    std::sort(v.begin(), v.end());
    const double pos = q * double(v.size() - 1);
    const size_t lo = size_t(pos);
    const double frac = pos - double(lo);
    return lo + 1 < v.size() ? v[lo] * (1 - frac) + v[lo + 1] * frac : v[lo];
}

using Groups = std::vector<std::vector<Config>>;

// A config's cost over its --baseline twin's: the ratio of the medians, and
// the median of the per-call ratios (call i of each ran in the same round,
// one right after the other). {0, 0} without a twin.
std::pair<double, double> overBaseline(const Groups& groups, const Config& c)
{
    for (const auto& group : groups)
        for (const Config& b : group)
            if (b.baseline && !c.baseline && b.flows == c.flows && b.path == c.path && !b.kernelNs.empty() &&
                b.kernelNs.size() == c.kernelNs.size()) {
                std::vector<double> perCall;
                for (size_t i = 0; i < c.kernelNs.size(); i++)
                    perCall.push_back(c.kernelNs[i] / b.kernelNs[i]);
                return {quantile(c.kernelNs, 0.5) / quantile(b.kernelNs, 0.5), quantile(perCall, 0.5)};
            }
    return {0, 0};
}

// Prints a row per configuration and returns them as JSON; *wrong gets the
// configurations whose verdicts or counters were not the path's.
Json report(const Groups& groups, uint32_t repeat, std::string* wrong)
{
    Json rows = Json::array();
    for (const auto& group : groups)
        for (const Config& c : group) {
            std::string verdicts, outcome;
            for (int v : c.verdicts)
                verdicts += (verdicts.empty() ? "" : ",") + std::string(npf::dataplane::xdpVerdictName(v));
            const uint64_t packets = uint64_t(c.kernelNs.size()) * repeat;
            for (uint32_t k = 0; k < NPF_STAT_MAX; k++)
                if (k != NPF_STAT_RX_TOTAL && c.moved[k])
                    outcome += (outcome.empty() ? "" : ",") + std::string(npf::dataplane::kStatNames[k]);
            std::string flowOutcome;
            for (uint32_t k = 0; k < NPF_STAT_MAX; k++)
                if (c.flowMoved[k])
                    flowOutcome += (flowOutcome.empty() ? "" : ",") + std::string(npf::dataplane::kStatNames[k]);
            const int want = expectedStat(c.path);
            const bool steered = c.path == Path::Primary || c.path == Path::Backup;
            const bool flowOk = NPF_ABI_VERSION < 4 || c.baseline || c.path == Path::Bare || c.path == Path::Redirect ||
                                (steered ? c.flowMoved[uint32_t(want)] == packets &&
                                               flowOutcome == npf::dataplane::kStatNames[want]
                                         : flowOutcome.empty());
            const bool ok = flowOk && c.verdicts == std::set<int>{expectedVerdict(c.path)} &&
                            (want < 0 ? outcome.empty()
                                      : c.moved[uint32_t(want)] == packets && c.moved[NPF_STAT_RX_TOTAL] == packets &&
                                            outcome == npf::dataplane::kStatNames[want]);
            if (!ok)
                *wrong += " " + c.name() + " (verdict " + verdicts + ", counters " + outcome + ", the flow's " +
                          flowOutcome + ");";
            if (outcome.empty())
                outcome = "-";
            if (flowOutcome.empty())
                flowOutcome = "-";
            const double med = quantile(c.kernelNs, 0.5), p10 = quantile(c.kernelNs, 0.1),
                         p90 = quantile(c.kernelNs, 0.9), wall = quantile(c.wallNs, 0.5);
            const auto [vsBase, vsBasePerCall] = overBaseline(groups, c);
            std::printf("%-28s %9.1f %7.1f %7.1f %11.1f  %-9s %-14s", c.name().c_str(), med, p10, p90, wall,
                        verdicts.c_str(), outcome.c_str());
            std::printf(vsBase > 0 ? " %.3f (%.3f)\n" : "\n", vsBase, vsBasePerCall);
            rows.push_back({{"config", c.name()},
                            {"flows", c.flows},
                            {"path", pathName(c.path)},
                            {"nsMedian", med},
                            {"nsP10", p10},
                            {"nsP90", p90},
                            {"wallNsMedian", wall},
                            {"verdict", verdicts},
                            {"outcome", outcome},
                            {"flowOutcome", flowOutcome},
                            {"ok", ok},
                            {"baseline", c.baseline},
                            {"overBaseline", vsBase > 0 ? Json(vsBase) : Json()},
                            {"overBaselinePerCall", vsBase > 0 ? Json(vsBasePerCall) : Json()},
                            {"ns", c.kernelNs}});
        }
    return rows;
}

class Bench {
public:
    Bench(uint32_t repeat, uint32_t payload, const std::string& baseline)
        : veth_(npf::topology::VethOptions{.queues = 1}),
          inRx_(veth_.rxNs()),
          skel_(npf::dataplane::Skeleton::open(FlowState::loadConfig())),
          repeat_(repeat),
          payload_(payload)
    {
        skel_.load();
        state_ = std::make_unique<FlowState>(skel_);
        bare_ = loadBarePass();
        npfAnchor_ = std::make_unique<XdpAttachment>(anchor_.a(), bpf_program__fd(skel_->progs.npf_xdp), "npf_xdp");
        bareAnchor_ = std::make_unique<XdpAttachment>(anchor_.b(), bare_.get(), "npfb_pass");
        xsks_ = std::make_unique<XskPair>(veth_.rxIf(), bpf_map__fd(skel_->maps.npf_xsks));
        redirect_ = loadBareRedirect(bpf_map__fd(skel_->maps.npf_xsks), NPF_XSK_PRIMARY(0));
        redirectAnchor_ = std::make_unique<XdpAttachment>(anchor2_.a(), redirect_.get(), "npfb_redirect");
        if (!baseline.empty()) {
            baseline_ = loadBaseline(baseline, skel_);
            baselineAnchor_ = std::make_unique<XdpAttachment>(anchor2_.b(), baselineProg(), "baseline npf_xdp");
        }
        ifindex_ = if_nametoindex(veth_.rxIf().c_str());
        if (!ifindex_)
            throwErrno("find interface " + veth_.rxIf());
    }

    // Flow ids 0 .. n-1 with rings; npf_flows holds exactly ids 0 .. n-1, added in order.
    void setFlows(uint32_t n)
    {
        state_->ensure(n);
        const int fd = bpf_map__fd(skel_->maps.npf_flows);
        npf_flow_key key, next;
        while (bpf_map_get_next_key(fd, nullptr, &next) == 0) {
            key = next;
            checkErrno(bpf_map_delete_elem(fd, &key), "delete an npf_flows entry");
        }
        for (uint32_t id = 0; id < n; id++) {
            key = flowKey(uint16_t(kPortBase + id));
            const npf_flow f = state_->flow(id);
            checkErrno(bpf_map_update_elem(fd, &key, &f, BPF_NOEXIST), "add flow id " + std::to_string(id));
        }
        flows_ = n;
    }

    // `calls` timed calls of the configuration (npf_flows as setFlows left it).
    void run(Config& c, uint32_t calls)
    {
        const auto frame = this->frame(c.path == Path::NoFlow ? kNoFlowPort : uint16_t(kPortBase + flows_ - 1));
        if (c.path == Path::Primary || c.path == Path::Backup)
            state_->setAllResident(c.path == Path::Primary);
        const int prog = c.path == Path::Bare       ? bare_.get()
                         : c.path == Path::Redirect ? redirect_.get()
                         : c.baseline               ? baselineProg()
                                                    : bpf_program__fd(skel_->progs.npf_xdp);
        const int statsFd = bpf_map__fd(skel_->maps.npf_stats);
        const XdpStats before = readStats(statsFd);
#if NPF_ABI_VERSION >= 4
        const int flowStatsFd = bpf_map__fd(skel_->maps.npf_flow_stats);
        const auto flowBefore = readFlowStats(flowStatsFd, flows_ - 1);
#endif
        npf_cursor& cur = state_->cursor(flows_ - 1);
        for (uint32_t i = 0; i < calls && !g_stop.load(); i++) {
            cur.cons = 0;
            cur.flags = NPF_CURSOR_F_SERVED;
            __atomic_store_n(&cur.prod, uint64_t(repeat_), __ATOMIC_RELEASE);
            // One packet per test run: the kernel runs a repeat on the
            // xdp_buff the previous run left, and npf_xdp moves its head (the
            // npf_meta in front of a steered packet), so a second run would
            // parse npf_meta as Ethernet. The kernel's timing of each run
            // includes its clock reads, as the bare rows show.
            xdp_md ctx{};
            ctx.data_end = uint32_t(frame.size());
            ctx.ingress_ifindex = ifindex_;
            ctx.rx_queue_index = 0;
            LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = uint32_t(frame.size()),
                        .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = 1);
            double kernelNs = 0;
            const uint64_t t0 = monotonicNs();
            for (uint32_t k = 0; k < repeat_; k++) {
                checkNeg(bpf_prog_test_run_opts(prog, &opts), "bpf_prog_test_run " + c.name());
                kernelNs += double(opts.duration);
                c.verdicts.insert(int(opts.retval));
            }
            const uint64_t t1 = monotonicNs();
            c.kernelNs.push_back(kernelNs / double(repeat_));
            c.wallNs.push_back(double(t1 - t0) / double(repeat_));
        }
        const XdpStats after = readStats(statsFd);
        for (uint32_t k = 0; k < NPF_STAT_MAX; k++)
            c.moved[k] += after[k] - before[k];
#if NPF_ABI_VERSION >= 4
        const auto flowAfter = readFlowStats(flowStatsFd, flows_ - 1);
        for (uint32_t i = 0; i < NPF_FLOW_STAT_MAX; i++)
            c.flowMoved[NPF_STAT_FLOW_FIRST + i] += flowAfter[i] - flowBefore[i];
#endif
    }

    uint32_t frameBytes() const { return uint32_t(frame(kNoFlowPort).size()); }

private:
    int baselineProg() const { return bpf_program__fd(bpf_object__find_program_by_name(baseline_.get(), "npf_xdp")); }

    npf_flow_key flowKey(uint16_t port) const
    {
        npf_flow_key k{};
        k.port = htons(port);
        k.family = NPF_FAMILY_IPV4;
        if (inet_pton(AF_INET, veth_.rxAddr().c_str(), k.addr) != 1)
            throwErrno(EINVAL, "rx address " + veth_.rxAddr());
        return k;
    }

    std::vector<uint8_t> frame(uint16_t dport) const
    {
        npf::bench::TrafficConfig t;
        t.srcMac = veth_.txMac();
        t.dstMac = veth_.rxMac();
        t.srcAddr = veth_.txAddr();
        t.dstAddr = veth_.rxAddr();
        t.dport = dport;
        t.payload = payload_;
        return npf::bench::templateFrame(t);
    }

    // Member order = teardown order, reversed: sockets and attachments go
    // before the programs, the programs before the namespaces.
    npf::topology::VethPair veth_;
    npf::topology::NetnsGuard inRx_; // test runs look ingress_ifindex up in this namespace
    AnchorVeth anchor_;
    npf::dataplane::Skeleton skel_;
    BpfObject baseline_; // --baseline, on skel_'s maps
    std::unique_ptr<FlowState> state_;
    Fd bare_, redirect_;
    AnchorVeth anchor2_; // the bare redirect's, and the baseline's
    std::unique_ptr<XdpAttachment> npfAnchor_, bareAnchor_, redirectAnchor_, baselineAnchor_;
    std::unique_ptr<XskPair> xsks_;
    uint32_t ifindex_ = 0;
    uint32_t repeat_, payload_;
    uint32_t flows_ = 0;
};

// Groups of configurations that share npf_flows' content: bare, then one
// per flow count (with the baseline object's runs where there is one).
Groups makeGroups(const std::vector<uint32_t>& flowCounts, bool baseline)
{
    Groups groups;
    groups.push_back({Config{.flows = 0, .path = Path::Bare}, Config{.flows = 0, .path = Path::Redirect}});
    for (uint32_t f : flowCounts) {
        auto& group = groups.emplace_back();
        for (bool base : {false, true})
            for (Path p : {Path::Primary, Path::Backup, Path::NoFlow})
                if (!base || baseline)
                    group.push_back(Config{.flows = f, .path = p, .baseline = base});
    }
    return groups;
}

// `calls` timed calls of every configuration, spread over `rounds` that
// rotate which group, and which configuration in it, goes first.
void runRounds(Bench& b, Groups& groups, uint32_t calls, uint32_t rounds)
{
    for (uint32_t r = 0; r < rounds && !g_stop.load(); r++) {
        const uint32_t n = calls * (r + 1) / rounds - calls * r / rounds;
        for (size_t g = 0; g < groups.size(); g++) {
            auto& group = groups[(g + r) % groups.size()];
            if (group.front().flows)
                b.setFlows(group.front().flows);
            for (size_t j = 0; j < group.size(); j++)
                b.run(group[(j + r) % group.size()], n);
        }
    }
}

} // namespace

int main(int argc, char** argv)
{
    uint32_t calls = 50, repeat = 4000, rounds = 5, payload = 64;
    std::vector<uint32_t> flowCounts{1, 32, 1024};
    std::string baseline;
    npf::bench::CommonOptions common;
    CLI::App app{"npf-xdp-bench: npf_xdp's cost per packet (bpf_prog_test_run_opts), by flow count and path"};
    app.add_option("--calls", calls, "timed calls per configuration (each of --repeat runs)")->check(CLI::Range(1, 100000));
    app.add_option("--repeat", repeat, "runs per call (the post ring holds " + std::to_string(NPF_POST_RING_SIZE) + ")")
        ->check(CLI::Range(1, NPF_POST_RING_SIZE));
    app.add_option("--rounds", rounds, "rounds the configurations interleave over")->check(CLI::Range(1, 1000));
    app.add_option("--flows", flowCounts, "flow counts (above NPF_MAX_FLOWS: skipped)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--payload", payload, "UDP payload bytes")->check(CLI::Range(24, 1400));
    app.add_option("--baseline", baseline,
                   "also run the npf_xdp of this object (another build's bpf/npf_xdp.bpf.o) on the same maps, "
                   "interleaved, and print the cost over it")
        ->check(CLI::ExistingFile);
    npf::bench::addCommonOptions(app, common);
    app.set_version_flag("--version", npf::cli::versionLine("npf-xdp-bench"));
    CLI11_PARSE(app, argc, argv);

    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    try {
        npf::bench::pinBenchmark(common);
        std::vector<uint32_t> used, skipped;
        for (uint32_t f : flowCounts)
            (f <= NPF_MAX_FLOWS ? used : skipped).push_back(f);
        std::sort(used.begin(), used.end());
        used.erase(std::unique(used.begin(), used.end()), used.end());
        if (used.empty())
            throwErrno(EINVAL, "no flow count within NPF_MAX_FLOWS (" + std::to_string(NPF_MAX_FLOWS) + ")");

        const uint64_t t0 = monotonicNs();
        Bench b(repeat, payload, baseline);
        Groups groups = makeGroups(used, !baseline.empty());
        b.setFlows(used.back()); // every ring made before timing starts
        const double setupSec = double(monotonicNs() - t0) / 1e9;
        runRounds(b, groups, calls, rounds);
        if (g_stop.load())
            throw std::runtime_error("interrupted");

        utsname u{};
        ::uname(&u);
        std::printf("npf-xdp-bench: ABI %d (NPF_MAX_FLOWS %d), %s, kernel %s, CPU %s, %u calls x %u runs in %u rounds, "
                    "UDP/IPv4 %u-byte payload (%u-byte frame), region 64 MiB, setup %.1f s\n",
                    NPF_ABI_VERSION, NPF_MAX_FLOWS, npf::bench::cpuModel().c_str(), u.release,
                    common.cpuName().c_str(), calls, repeat, rounds, payload,
                    b.frameBytes(), setupSec);
        for (uint32_t f : skipped)
            std::printf("%u flows: skipped (NPF_MAX_FLOWS is %d)\n", f, NPF_MAX_FLOWS);
        std::printf("%-28s %9s %7s %7s %11s  %-9s %-14s %s\n", "configuration", "ns/pkt", "p10", "p90",
                    "wall ns/pkt", "verdict", "outcome", baseline.empty() ? "" : "/baseline (per call)");
        std::string wrong;
        const Json rows = report(groups, repeat, &wrong);
        const Json out{{"bench", "xdp"},
                       {"abi", NPF_ABI_VERSION},
                       {"maxFlows", NPF_MAX_FLOWS},
                       {"cpuModel", npf::bench::cpuModel()},
                       {"kernel", u.release},
                       {"cpu", common.cpu},
                       {"calls", calls},
                       {"repeat", repeat},
                       {"rounds", rounds},
                       {"payload", payload},
                       {"baselineObject", baseline},
                       {"frameBytes", b.frameBytes()},
                       {"skippedFlows", skipped},
                       {"rows", rows}};
        npf::bench::emitJson(out, common.jsonFile);
        if (!wrong.empty())
            throw std::runtime_error("measured another path than intended:" + wrong);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "npf-xdp-bench: %s\n", e.what());
        return 1;
    }
}
