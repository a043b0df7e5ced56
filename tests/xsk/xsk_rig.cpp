#include "xsk_rig.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "dataplane/iface.h"
#include "sys/error.h"
#include "wait.h"

namespace npf::test {

XdpAttachment::XdpAttachment(const Netns& ns, const std::string& ifname, int progFd, uint32_t flags)
    : ns_(ns), flags_(flags)
{
    inNetns(ns_, [&] {
        ifindex_ = if_nametoindex(ifname.c_str());
        if (!ifindex_)
            throwErrno("if_nametoindex " + ifname);
        checkNeg(bpf_xdp_attach(int(ifindex_), progFd, flags_, nullptr),
                 "attach npf_xdp to " + ifname + ((flags_ & XDP_FLAGS_SKB_MODE) ? " (skb)" : " (native)"));
    });
}

XdpAttachment::~XdpAttachment()
{
    try {
        inNetns(ns_, [&] { (void)bpf_xdp_detach(int(ifindex_), flags_, nullptr); });
    } catch (...) {
        // The namespace going away detaches the program anyway.
    }
}

Rig::Rig(const RigOptions& opt)
    : opt_(opt), veth_(VethOptions{.queues = opt.queues, .mtu = opt.mtu}),
      skel_(dataplane::Skeleton::open({.queues = uint32_t(opt.queues)})),
      ring_(dataplane::FlowRing::create(0, 0)),
      bitmap_(dataplane::ResidentMap::create(opt.regionPages))
{
    skel_.load();
    const uint32_t id = 0;
    const int ringFd = ring_.fd(), bitmapFd = bitmap_.fd();
    checkErrno(bpf_map_update_elem(bpf_map__fd(skel_->maps.npf_rings), &id, &ringFd, BPF_ANY), "install the ring");
    checkErrno(bpf_map_update_elem(skel_.regionsFd(bitmap_.sizeClass()), &id, &bitmapFd, BPF_ANY), "bind the bitmap");
    npf_flow_key key{};
    key.port = htons(opt_.port);
    key.family = NPF_FAMILY_ANY;
    npf_flow val{0, 0, regionBytes()};
    checkNeg(bpf_map_update_elem(bpf_map__fd(skel_->maps.npf_flows), &key, &val, BPF_ANY), "add flow");
    flows_.open(0);

    attach_ = std::make_unique<XdpAttachment>(veth_.rxNs(), veth_.rxIf(), bpf_program__fd(skel_->progs.npf_xdp),
                                              opt_.xdpFlags);
    int xskmap = bpf_map__fd(skel_->maps.npf_xsks);
    inNetns(veth_.rxNs(), [&] {
        for (int q = 0; opt_.sockets && q < opt_.queues; q++) {
            xsk::QueueConfig qc;
            qc.ifindex = attach_->ifindex();
            qc.queue = uint32_t(q);
            qc.umem = opt_.umem;
            qc.primaryRxSize = qc.backupRxSize = opt_.rxSize;
            qc.regionBytes = regionBytes();
            queues_.push_back(std::make_unique<xsk::QueueSockets>(qc, flows_, xskmap));
        }
    });
}

Rig::~Rig() = default;

void Rig::post(uint64_t offset, uint32_t len)
{
    npf_cursor* cur = ring_.cursor();
    cur->flags = NPF_CURSOR_F_SERVED;
    uint64_t prod = std::atomic_ref<__u64>(cur->prod).load(std::memory_order_relaxed);
    npf_post& slot = ring_.posts()[prod & (NPF_POST_RING_SIZE - 1)];
    slot.offset = offset;
    slot.len = len;
    std::atomic_ref<__u64>(cur->prod).store(prod + 1, std::memory_order_release);
}

uint64_t Rig::posted() const
{
    return std::atomic_ref<__u64>(ring_.cursor()->prod).load(std::memory_order_acquire);
}

uint64_t Rig::consumed() const
{
    return std::atomic_ref<__u64>(ring_.cursor()->cons).load(std::memory_order_acquire);
}

void Rig::setResident(uint64_t page, bool on)
{
    std::atomic_ref<uint64_t> w(bitmap_.words()[page / 64]);
    if (on)
        w.fetch_or(1ull << (page % 64));
    else
        w.fetch_and(~(1ull << (page % 64)));
}

uint64_t Rig::xdpStat(uint32_t stat) const
{
    int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> v(size_t(ncpu > 0 ? ncpu : 1));
    checkNeg(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.npf_stats), &stat, v.data()), "read npf_stats");
    uint64_t s = 0;
    for (uint64_t x : v)
        s += x;
    return s;
}

uint64_t Rig::txDropped()
{
    return inNetns(veth_.txNs(), [&]() -> uint64_t {
        const int ifindex = int(if_nametoindex(veth_.txIf().c_str()));
        if (!ifindex)
            throwErrno("if_nametoindex " + veth_.txIf());
        return dataplane::linkStats(ifindex).tx_dropped;
    });
}

std::vector<uint8_t> payloadFor(uint32_t i, size_t len)
{
    std::vector<uint8_t> p(len);
    for (size_t j = 0; j < len; j++)
        p[j] = uint8_t(j < 4 ? (i >> (8 * j)) : (i * 31 + j * 7 + (j >> 8)));
    return p;
}

size_t sendDatagrams(VethPair& v, uint16_t dstPort, uint16_t srcPort, const std::vector<std::vector<uint8_t>>& payloads,
                     size_t chunk, const std::atomic<uint64_t>* received)
{
    return inNetns(v.txNs(), [&]() -> size_t {
        Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        if (!s)
            throwErrno("udp socket");
        sockaddr_in src{};
        src.sin_family = AF_INET;
        src.sin_port = htons(srcPort);
        checkErrno(::bind(s.get(), reinterpret_cast<sockaddr*>(&src), sizeof(src)), "bind sender");
        sockaddr_in dst{};
        dst.sin_family = AF_INET;
        dst.sin_port = htons(dstPort);
        if (inet_pton(AF_INET, v.rxAddr().c_str(), &dst.sin_addr) != 1)
            throw std::runtime_error("bad rx address " + v.rxAddr());
        checkErrno(::connect(s.get(), reinterpret_cast<sockaddr*>(&dst), sizeof(dst)), "connect sender");
        uint64_t base = received ? received->load() : 0;
        size_t sent = 0;
        for (const auto& p : payloads) {
            // A datagram the kernel stack got (fail open) may come back as an
            // ICMP port unreachable, reported on the next send: send again.
            while (::send(s.get(), p.data(), p.size(), 0) < 0)
                if (errno != ECONNREFUSED)
                    throwErrno("send datagram");
            sent++;
            if (chunk && received && (sent % chunk == 0 || sent == payloads.size()) &&
                !waitUntil([&] { return received->load() >= base + sent; }, kDeadline,
                           std::chrono::microseconds(50)))
                throw std::runtime_error("sent " + std::to_string(sent) + " datagrams, the receiver got " +
                                         std::to_string(received->load() - base) + " within " +
                                         std::to_string(kDeadline.count()) + " ms");
        }
        return sent;
    });
}

} // namespace npf::test
