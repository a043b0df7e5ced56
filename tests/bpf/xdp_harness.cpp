#include "xdp_harness.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "dataplane/stats.h"
#include "sys/clock.h"
#include "sys/error.h"

namespace npf::test {
namespace {

size_t possibleCpus() { return static_cast<size_t>(checkNeg(libbpf_num_possible_cpus(), "count possible CPUs")); }

} // namespace

const char* statName(uint32_t stat) { return stat < NPF_STAT_MAX ? dataplane::kStatNames[stat] : "?"; }

int outcomeVerdict(uint32_t stat)
{
    if (stat >= NPF_STAT_DROP_RNR && stat <= NPF_STAT_DROP_CSUM)
        return XDP_DROP;
    if (stat == NPF_STAT_REDIR_PRIMARY || stat == NPF_STAT_REDIR_BACKUP)
        return XDP_REDIRECT;
    return XDP_PASS; // PASS_* and REDIR_FAIL (fails open)
}

const char* verdictName(int verdict) { return dataplane::xdpVerdictName(verdict); }

npf_flow_key flowKeyAny(uint16_t port)
{
    npf_flow_key k{};
    k.port = htons(port);
    k.family = NPF_FAMILY_ANY;
    return k;
}

npf_flow_key flowKeyV4(const Ipv4Addr& addr, uint16_t port)
{
    npf_flow_key k = flowKeyAny(port);
    k.family = NPF_FAMILY_IPV4;
    std::memcpy(k.addr, addr.data(), addr.size());
    return k;
}

npf_flow_key flowKeyV6(const Ipv6Addr& addr, uint16_t port)
{
    npf_flow_key k = flowKeyAny(port);
    k.family = NPF_FAMILY_IPV6;
    std::memcpy(k.addr, addr.data(), addr.size());
    return k;
}

std::optional<npf_meta> RunResult::meta() const
{
    if (npfMetaLen != sizeof(npf_meta) || out.size() < metaLen + npfMetaLen)
        return std::nullopt;
    npf_meta m;
    std::memcpy(&m, out.data() + metaLen, sizeof(m));
    return m;
}

XdpHarness::XdpHarness(HarnessOptions opt)
    : skel_(dataplane::Skeleton::open({.queues = opt.queues, .chain = true})),
      veth_(VethOptions{.queues = opt.vethQueues}),
      regionPages_(opt.regionPages),
      bitmap_(dataplane::ResidentMap::create(opt.regionPages))
{
    skel_.load();
    NetnsGuard in(veth_.rxNs());
    ifindex_ = static_cast<int>(if_nametoindex(veth_.rxIf().c_str()));
    if (ifindex_ == 0)
        throwErrno("ifindex of " + veth_.rxIf());
    xsks_ = std::make_unique<XskPair>(veth_.rxIf(), 0);
}

XdpHarness::~XdpHarness() = default;

void XdpHarness::reset()
{
    int fd = bpf_map__fd(skel_->maps.npf_flows);
    npf_flow_key key, next;
    while (bpf_map_get_next_key(fd, nullptr, &next) == 0) {
        key = next;
        checkErrno(bpf_map_delete_elem(fd, &key), "delete npf_flows entry");
    }
    for (auto& [id, r] : rings_) {
        std::memset(r.ring(), 0, sizeof(npf_ring));
        bindBitmap(id, &bitmap_);
    }
    std::memset(bitmap_.words(), 0, bitmap_.wordCount() * sizeof(uint64_t));
    for (uint32_t q = 0; q < queues(); q++)
        setSockets(q, false, false);
    // Every id's entry, of generation 0 like the cursors: one batch write.
    std::vector<uint32_t> ids(NPF_MAX_FLOWS);
    for (uint32_t i = 0; i < NPF_MAX_FLOWS; i++)
        ids[i] = i;
    std::vector<npf_flow_stats> zero(NPF_MAX_FLOWS * possibleCpus(), npf_flow_stats{});
    uint32_t count = NPF_MAX_FLOWS;
    checkErrno(bpf_map_update_batch(bpf_map__fd(skel_->maps.npf_flow_stats), ids.data(), zero.data(), &count, nullptr),
               "zero npf_flow_stats");
}

npf_ring& XdpHarness::ring(uint32_t flow)
{
    auto it = rings_.find(flow);
    if (it != rings_.end())
        return *it->second.ring();
    if (flow >= NPF_MAX_FLOWS)
        throw std::out_of_range("flow id " + std::to_string(flow) + " has no ring slot");
    dataplane::FlowRing r = dataplane::FlowRing::create(0, 0);
    const int fd = r.fd();
    checkErrno(bpf_map_update_elem(bpf_map__fd(skel_->maps.npf_rings), &flow, &fd, BPF_ANY),
               "install the post ring of flow id " + std::to_string(flow));
    bindBitmap(flow, &bitmap_);
    return *rings_.emplace(flow, std::move(r)).first->second.ring();
}

const npf_ring& XdpHarness::ringOf(uint32_t flow) const
{
    auto it = rings_.find(flow);
    if (it == rings_.end())
        throw std::out_of_range("flow id " + std::to_string(flow) + " has no ring");
    return *it->second.ring();
}

void XdpHarness::bindBitmap(uint32_t id, const dataplane::ResidentMap* bitmap)
{
    // An update of an array of maps waits for an RCU grace period: skip the
    // ones that change nothing (reset() rebinds every ring).
    auto it = bound_.find(id);
    if (it != bound_.end() && it->second == bitmap)
        return;
    bound_[id] = bitmap;
    for (uint32_t c = 0; c < NPF_BITMAP_CLASSES; c++) {
        const int outer = skel_.regionsFd(c);
        if (bitmap && bitmap->sizeClass() == c) {
            const int fd = bitmap->fd();
            checkErrno(bpf_map_update_elem(outer, &id, &fd, BPF_ANY), "bind a bitmap to flow id " + std::to_string(id));
        } else if (bpf_map_delete_elem(outer, &id) != 0 && errno != ENOENT) {
            throwErrno("unbind the bitmap of flow id " + std::to_string(id));
        }
    }
}

void XdpHarness::addFlow(const npf_flow_key& key, uint32_t id, uint32_t gen, std::optional<uint64_t> regionSize)
{
    if (id < NPF_MAX_FLOWS)
        ring(id); // the cursor keeps its gen (0 after reset): a case may make them differ
    npf_flow f{.id = id, .gen = gen, .region_size = regionSize ? *regionSize : regionBytes()};
    checkErrno(bpf_map_update_elem(bpf_map__fd(skel_->maps.npf_flows), &key, &f, BPF_ANY), "add npf_flows entry");
}

void XdpHarness::setPost(uint32_t flow, uint64_t seq, uint64_t offset, uint32_t len)
{
    ring(flow).posts[seq & (NPF_POST_RING_SIZE - 1)] = npf_post{.offset = offset, .len = len, .pad = 0};
}

npf_post XdpHarness::post(uint32_t flow, uint64_t seq) const
{
    return ringOf(flow).posts[seq & (NPF_POST_RING_SIZE - 1)];
}

void XdpHarness::setCursor(uint32_t flow, uint64_t prod, uint64_t cons)
{
    npf_cursor& c = ring(flow).cursor;
    c.flags = NPF_CURSOR_F_SERVED; // an engine serves every flow a case sets up
    c.cons = cons;
    std::atomic_ref(c.prod).store(prod, std::memory_order_release);
}

void XdpHarness::newGeneration(uint32_t id, uint32_t gen)
{
    npf_ring& r = ring(id);
    std::memset(&r.cursor, 0, sizeof(r.cursor));
    r.cursor.gen = gen;
    std::vector<npf_flow_stats> percpu(possibleCpus(), npf_flow_stats{.gen = gen, .pad = 0, .n = {}});
    checkErrno(bpf_map_update_elem(bpf_map__fd(skel_->maps.npf_flow_stats), &id, percpu.data(), BPF_ANY),
               "reset npf_flow_stats[" + std::to_string(id) + "]");
}

std::vector<uint32_t> XdpHarness::ringIds() const
{
    std::vector<uint32_t> ids;
    for (const auto& [id, r] : rings_)
        ids.push_back(id);
    return ids;
}

npf_cursor XdpHarness::cursor(uint32_t flow) const
{
    npf_cursor c{};
    if (rings_.contains(flow))
        std::memcpy(&c, &ringOf(flow).cursor, sizeof(c));
    return c;
}

void XdpHarness::setResident(uint64_t page, bool resident)
{
    if (page >= regionPages())
        throw std::out_of_range("resident page " + std::to_string(page) + " outside the region");
    uint64_t& word = bitmap_.words()[page / 64];
    if (resident)
        word |= 1ull << (page % 64);
    else
        word &= ~(1ull << (page % 64));
}

void XdpHarness::setAllResident(bool resident)
{
    std::memset(bitmap_.words(), resident ? 0xff : 0, bitmap_.wordCount() * sizeof(uint64_t));
}

void XdpHarness::chain(int progFd)
{
    const int fd = bpf_map__fd(skel_->maps.npf_next);
    const uint32_t key = NPF_NEXT_SLOT;
    if (progFd < 0) {
        if (bpf_map_delete_elem(fd, &key) != 0 && errno != ENOENT)
            throwErrno("empty npf_next");
        return;
    }
    checkNeg(bpf_map_update_elem(fd, &key, &progFd, BPF_ANY) ? -errno : 0, "chain a program behind npf_xdp");
}

void XdpHarness::setSockets(uint32_t queue, bool primary, bool backup)
{
    int fd = bpf_map__fd(skel_->maps.npf_xsks);
    auto set = [&](uint32_t slot, bool on, int sock) {
        if (on) {
            checkErrno(bpf_map_update_elem(fd, &slot, &sock, BPF_ANY),
                       "put AF_XDP socket into npf_xsks slot " + std::to_string(slot));
        } else if (bpf_map_delete_elem(fd, &slot) != 0 && errno != ENOENT) {
            throwErrno("clear npf_xsks slot " + std::to_string(slot));
        }
    };
    set(NPF_XSK_PRIMARY(queue), primary, xsks_->primaryFd());
    set(NPF_XSK_BACKUP(queue), backup, xsks_->backupFd());
}

Counters XdpHarness::counters() const
{
    int ncpu = libbpf_num_possible_cpus();
    checkNeg(ncpu, "count possible CPUs");
    std::vector<uint64_t> per(static_cast<size_t>(ncpu));
    Counters sum{};
    int fd = bpf_map__fd(skel_->maps.npf_stats);
    for (uint32_t k = 0; k < NPF_STAT_MAX; k++) {
        checkErrno(bpf_map_lookup_elem(fd, &k, per.data()), std::string("read npf_stats ") + statName(k));
        for (uint64_t v : per)
            sum[k] += v;
    }
    return sum;
}

FlowCounters XdpHarness::flowCounters(uint32_t id) const
{
    std::vector<npf_flow_stats> percpu(possibleCpus());
    checkErrno(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.npf_flow_stats), &id, percpu.data()),
               "read npf_flow_stats[" + std::to_string(id) + "]");
    FlowCounters sum{};
    for (const npf_flow_stats& v : percpu)
        for (size_t i = 0; i < sum.size(); i++)
            sum[i] += v.n[i];
    return sum;
}

std::vector<FlowCounters> XdpHarness::allFlowCounters() const
{
    const size_t ncpu = possibleCpus();
    std::vector<uint32_t> keys(NPF_MAX_FLOWS);
    std::vector<npf_flow_stats> values(NPF_MAX_FLOWS * ncpu);
    std::vector<FlowCounters> out(NPF_MAX_FLOWS);
    uint32_t batch = 0;
    size_t done = 0;
    while (done < NPF_MAX_FLOWS) {
        uint32_t count = static_cast<uint32_t>(NPF_MAX_FLOWS - done);
        const int rc = bpf_map_lookup_batch(bpf_map__fd(skel_->maps.npf_flow_stats), done ? &batch : nullptr, &batch,
                                            keys.data() + done, values.data() + done * ncpu, &count, nullptr);
        if (rc != 0 && errno != ENOENT)
            throwErrno("read npf_flow_stats (batch)");
        done += count;
        if (rc != 0 || count == 0)
            break;
    }
    if (done != NPF_MAX_FLOWS)
        throw std::runtime_error("npf_flow_stats batch read returned " + std::to_string(done) + " entries");
    for (size_t k = 0; k < done; k++) {
        FlowCounters& sum = out.at(keys[k]);
        for (size_t c = 0; c < ncpu; c++)
            for (size_t i = 0; i < sum.size(); i++)
                sum[i] += values[k * ncpu + c].n[i];
    }
    return out;
}

std::vector<uint32_t> XdpHarness::flowStatsGens(uint32_t id) const
{
    std::vector<npf_flow_stats> percpu(possibleCpus());
    checkErrno(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.npf_flow_stats), &id, percpu.data()),
               "read npf_flow_stats[" + std::to_string(id) + "]");
    std::vector<uint32_t> gens;
    for (const npf_flow_stats& v : percpu)
        gens.push_back(v.gen);
    return gens;
}

RunResult XdpHarness::run(std::span<const uint8_t> pkt, uint32_t queue, std::span<const uint8_t> metaIn)
{
    // ingress_ifindex is looked up in the caller's namespace; the queue must
    // exist on it (real_num_rx_queues), which is why a veth is needed.
    NetnsGuard inNs(veth_.rxNs());
    std::vector<uint8_t> in(metaIn.begin(), metaIn.end());
    in.insert(in.end(), pkt.begin(), pkt.end());
    xdp_md ctxIn{};
    ctxIn.data = static_cast<uint32_t>(metaIn.size());
    ctxIn.data_end = static_cast<uint32_t>(in.size());
    ctxIn.ingress_ifindex = static_cast<uint32_t>(ifindex_);
    ctxIn.rx_queue_index = queue;
    xdp_md ctxOut{};
    RunResult r;
    r.out.resize(in.size() + 256);
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = in.data(), .data_out = r.out.data(),
                .data_size_in = static_cast<uint32_t>(in.size()),
                .data_size_out = static_cast<uint32_t>(r.out.size()), .ctx_in = &ctxIn,
                .ctx_out = &ctxOut, .ctx_size_in = sizeof(ctxIn), .ctx_size_out = sizeof(ctxOut),
                .repeat = 1);
    r.startNs = monotonicNs();
    checkNeg(bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.npf_xdp), &opts),
             "bpf_prog_test_run npf_xdp (" + std::to_string(pkt.size()) + " bytes, rx queue " +
                 std::to_string(queue) + ")");
    r.endNs = monotonicNs();
    r.verdict = static_cast<int>(opts.retval);
    r.out.resize(opts.data_size_out);
    r.metaLen = ctxOut.data - ctxOut.data_meta;
    // npf_xdp never changes the packet's length: what the frame grew by is in front of it.
    if (r.out.size() >= r.metaLen + pkt.size())
        r.npfMetaLen = static_cast<uint32_t>(r.out.size() - r.metaLen - pkt.size());
    return r;
}

} // namespace npf::test
