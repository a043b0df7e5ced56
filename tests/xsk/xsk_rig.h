// Integration rig for the AF_XDP layer: a veth pair in two namespaces, the
// real npf_xdp program loaded and attached to the rx end, its mmapable maps,
// one flow, and QueueSockets per RX queue. Everything that depends on the rx
// namespace (ifindex, attach, socket bind) runs in a thread that setns'd.
#pragma once

#include <linux/if_link.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/flow_ring.h"
#include "dataplane/skeleton.h"
#include "netns.h"
#include "on_thread.h"
#include "sys/mmap_area.h"
#include "xsk/queue.h"

namespace npf::test {

// Runs fn() in a new thread inside `ns`; returns its result, rethrows its exception.
template <typename F>
auto inNetns(const Netns& ns, F&& fn) -> decltype(fn())
{
    return onThread([&]() -> decltype(fn()) {
        NetnsGuard g(ns);
        return fn();
    });
}

// An XDP program attached with bpf_xdp_attach, detached on destruction.
class XdpAttachment {
public:
    XdpAttachment(const Netns& ns, const std::string& ifname, int progFd, uint32_t flags);
    ~XdpAttachment();
    XdpAttachment(const XdpAttachment&) = delete;
    XdpAttachment& operator=(const XdpAttachment&) = delete;
    uint32_t ifindex() const { return ifindex_; }

private:
    const Netns& ns_;
    uint32_t ifindex_ = 0;
    uint32_t flags_;
};

struct RigOptions {
    int queues = 1;
    uint32_t xdpFlags = XDP_FLAGS_DRV_MODE;
    uint64_t regionPages = 4096;
    xsk::UmemConfig umem;
    uint32_t rxSize = 2048;
    uint16_t port = 4791;
    bool sockets = true; // create QueueSockets for every queue
    int mtu = 1500;      // of both veth ends
};

class Rig {
public:
    explicit Rig(const RigOptions& opt);
    ~Rig();

    // Posts a buffer on flow 0 (the one flow).
    void post(uint64_t offset, uint32_t len);
    uint64_t posted() const;
    // Flow 0's consumer cursor: seqs XDP has claimed.
    uint64_t consumed() const;
    void setResident(uint64_t page, bool on);
    // Sum over CPUs of npf_stats[stat].
    uint64_t xdpStat(uint32_t stat) const;
    // The tx veth's tx_dropped (read over rtnetlink in the tx namespace):
    // datagrams the rx end had no room for, before XDP saw them (its ring
    // in native mode, the backlog in skb mode).
    uint64_t txDropped();

    VethPair& veth() { return veth_; }
    xsk::FlowSet& flows() { return flows_; }
    void closeSockets() { queues_.clear(); }
    int xskmapFd() const { return bpf_map__fd(skel_->maps.npf_xsks); }
    uint32_t ifindex() const { return attach_->ifindex(); }
    xsk::QueueSockets& queue(int q) { return *queues_.at(q); }
    int queueCount() const { return int(queues_.size()); }
    uint16_t port() const { return opt_.port; }
    uint64_t regionBytes() const { return opt_.regionPages * NPF_PAGE_SIZE; }

private:
    RigOptions opt_;
    // Teardown order = reverse: sockets, detach, maps, program, namespaces.
    VethPair veth_;
    dataplane::Skeleton skel_;
    dataplane::FlowRing ring_;      // flow 0's
    dataplane::ResidentMap bitmap_; // flow 0's region
    std::unique_ptr<XdpAttachment> attach_;
    xsk::FlowSet flows_;
    std::vector<std::unique_ptr<xsk::QueueSockets>> queues_;
};

// Sends each payload as one UDP datagram from a socket bound to `srcPort`
// (0: any) in the tx namespace. After every `chunk` datagrams it waits until
// `*received` reaches the number sent, so rings never overflow however slowly
// the receiver runs; throws if it does not within kDeadline (a datagram sent
// was never received). Returns the number sent.
size_t sendDatagrams(VethPair& v, uint16_t dstPort, uint16_t srcPort, const std::vector<std::vector<uint8_t>>& payloads,
                     size_t chunk = 0, const std::atomic<uint64_t>* received = nullptr);

// Deterministic payload of datagram `i`: first 4 bytes = i, then a pattern.
std::vector<uint8_t> payloadFor(uint32_t i, size_t len);

} // namespace npf::test
