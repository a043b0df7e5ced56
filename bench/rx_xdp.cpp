// AF_XDP contenders: "xdp-drop" (frames recycled untouched: the ceiling of
// the path npf builds on) and "static-pinned" (payload copied into a fully
// pinned, prefaulted region: the classic answer to the cold ring).
#include <linux/if_link.h>
#include <net/if.h>
#include <poll.h>
#include <sys/mman.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "sys/thread.h"
#include "bench_abi.h"
#include "bench_rx.skel.h"
#include "receiver.h"
#include "generator.h"
#include "sys/csum.h"
#include "sys/error.h"
#include "sys/log.h"
#include "xsk/socket.h"
#include "xsk/umem.h"

namespace npf::bench {
namespace {

// npfb_rx attached natively to the rx veth for the lifetime of the object.
class RxProg {
public:
    RxProg(const std::string& ifname, uint16_t port)
    {
        ifindex_ = int(if_nametoindex(ifname.c_str()));
        if (!ifindex_)
            throwErrno("find interface " + ifname);
        skel_ = bench_rx__open();
        if (!skel_)
            throwErrno("open the npfb_rx BPF object");
        skel_->rodata->port = port;
        if (int rc = bench_rx__load(skel_)) {
            bench_rx__destroy(skel_);
            throwErrno(-rc, "load the npfb_rx XDP program");
        }
        if (int rc = bpf_xdp_attach(ifindex_, bpf_program__fd(skel_->progs.npfb_rx), XDP_FLAGS_DRV_MODE, nullptr)) {
            bench_rx__destroy(skel_);
            throwErrno(-rc, "attach npfb_rx to " + ifname + " (native)");
        }
    }
    ~RxProg()
    {
        bpf_xdp_detach(ifindex_, XDP_FLAGS_DRV_MODE, nullptr);
        bench_rx__destroy(skel_);
    }
    RxProg(const RxProg&) = delete;
    RxProg& operator=(const RxProg&) = delete;
    int xsks() const { return bpf_map__fd(skel_->maps.npfb_xsks); }
    int ifindex() const { return ifindex_; }

private:
    int ifindex_ = 0;
    bench_rx* skel_ = nullptr;
};

// One RX queue: UMEM then socket (the socket closes first).
struct XskQueue {
    std::unique_ptr<xsk::Umem> umem;
    xsk::XskSocket sock;
};

class XskReceiver final : public Receiver {
public:
    XskReceiver(bool copy, const RxConfig& cfg) : cfg_(cfg), copy_(copy), prog_(cfg.ifname, cfg.port)
    {
        if (copy_) {
            // Static pinning: the whole region locked and prefaulted up front.
            const auto t = std::chrono::steady_clock::now();
            void* p = ::mmap(nullptr, cfg.regionSize, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED, -1, 0);
            if (p == MAP_FAILED)
                throwErrno("mmap+mlock a " + std::to_string(cfg.regionSize >> 20) + " MiB pinned region");
            region_ = static_cast<uint8_t*>(p);
            pinSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
        }
        for (uint32_t q = 0; q < cfg.queues; q++) {
            auto xq = std::make_unique<XskQueue>();
            Fd fd = xsk::openXskSocket("bench xsk q" + std::to_string(q));
            xsk::UmemConfig uc;
            uc.frameSize = cfg.frameSize;
            uc.frameCount = cfg.frameCount;
            xq->umem = std::make_unique<xsk::Umem>(fd.get(), uc, "bench q" + std::to_string(q));
            // Single-buffer: the live-frames generator cannot send frames above ~3.4 KB.
            xq->sock = xsk::XskSocket::bindOwner(std::move(fd), uint32_t(prog_.ifindex()), q, NPF_POST_RING_SIZE,
                                                 xsk::BindMode::Copy, true, false, 1000,
                                                 "bench xsk q" + std::to_string(q));
            xq->sock.insertInto(prog_.xsks(), q);
            queues_.push_back(std::move(xq));
        }
    }
    ~XskReceiver() override
    {
        stop();
        queues_.clear();
        if (region_)
            ::munmap(region_, cfg_.regionSize);
    }

    size_t lanes() const override { return queues_.size(); }
    void start(std::vector<Meter*> meters) override
    {
        for (size_t q = 0; q < queues_.size(); q++)
            threads_.emplace_back([this, q, m = meters[q]] { loop(*queues_[q], *m, q); });
    }
    void stop() override
    {
        stop_.store(true);
        for (auto& t : threads_)
            t.join();
        threads_.clear();
    }
    uint64_t pinnedBytes() const override
    {
        uint64_t b = copy_ ? cfg_.regionSize : 0;
        for (auto& q : queues_)
            b += q->umem->bytes();
        return b;
    }
    uint64_t residentBytes() const override { return copy_ ? cfg_.regionSize : 0; }
    std::string route() const override { return copy_ ? "pinned" : "umem"; }
    nlohmann::json details() const override
    {
        uint64_t dropped = 0, full = 0, fillEmpty = 0;
        for (auto& q : queues_) {
            xdp_statistics s = q->sock.kernelStats();
            dropped += s.rx_dropped;
            full += s.rx_ring_full;
            fillEmpty += s.rx_fill_ring_empty_descs;
        }
        nlohmann::json j{{"kernelRxDropped", dropped}, {"kernelRxRingFull", full}, {"fillRingEmpty", fillEmpty}};
        if (copy_)
            j["pinSeconds"] = pinSeconds_;
        return j;
    }

private:
    void loop(XskQueue& xq, Meter& m, size_t q) noexcept
    {
        npf::pinThread(cfg_.cpus[q % cfg_.cpus.size()], "npf-bench receiver");
        xsk::RxRing& rx = xq.sock.rx();
        uint64_t frames[64];
        uint64_t slot = q; // queues interleave over the slots
        int idle = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
            uint32_t first;
            const uint32_t n = rx.peek(64, &first);
            if (n == 0) {
                if (xq.umem->fillNeedsWakeup())
                    xq.sock.kick();
                if (++idle < 16) {
                    sched_yield();
                    continue;
                }
                pollfd pfd{xq.sock.fd(), POLLIN, 0};
                ::poll(&pfd, 1, 10);
                continue;
            }
            idle = 0;
            const uint64_t now = monotonicNs();
            uint64_t bytes = 0;
            for (uint32_t i = 0; i < n; i++) {
                const xdp_desc& d = rx.at(first + i);
                frames[i] = xq.umem->frameOf(d.addr);
                const uint32_t len = d.len - NPFB_PAYLOAD_OFF;
                bytes += len;
                if (copy_) {
                    uint8_t* dst = region_ + cfg_.slotOffset(slot);
                    slot += cfg_.queues;
                    const uint8_t* pkt = xq.umem->base() + d.addr;
                    if (udpCsumHolds(pkt, len, csumCopy(dst, pkt + NPFB_PAYLOAD_OFF, len)))
                        m.onPayload(dst, len, now);
                    else
                        m.rejected(1);
                }
            }
            rx.release(n);
            xq.umem->recycle(frames, n);
            m.count(n, bytes, now);
        }
    }

    RxConfig cfg_;
    bool copy_;
    RxProg prog_;
    uint8_t* region_ = nullptr;
    double pinSeconds_ = 0;
    std::vector<std::unique_ptr<XskQueue>> queues_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
};

} // namespace

std::unique_ptr<Receiver> makeXskReceiver(bool copy, const RxConfig& cfg)
{
    return std::make_unique<XskReceiver>(copy, cfg);
}

// Kernel-socket contenders still need a native XDP program on the veth (the
// generator's frames need its NAPI context); npfb_rx with no sockets passes.
std::shared_ptr<void> attachPassProgram(const RxConfig& cfg)
{
    return std::make_shared<RxProg>(cfg.ifname, cfg.port);
}

} // namespace npf::bench
