// Kernel-socket contenders: UDP recvmmsg and io_uring multishot receive with
// provided buffers, both into ordinary pageable memory.
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "sys/thread.h"
#include "receiver.h"
#include "sys/error.h"
#include "sys/fd.h"

namespace npf::bench {

std::shared_ptr<void> attachPassProgram(const RxConfig& cfg);

namespace {

Fd udpSocket(const RxConfig& cfg)
{
    Fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd)
        throwErrno("UDP socket");
    int buf = 64 << 20;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
        throwErrno("SO_RCVBUFFORCE on the receiving socket");
    timeval tv{0, 10000};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(cfg.port);
    inet_pton(AF_INET, cfg.addr.c_str(), &a.sin_addr);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0)
        throwErrno("bind UDP " + cfg.addr + ":" + std::to_string(cfg.port));
    return fd;
}

// UDP counters of the namespace (/proc/net/snmp; the bench's rx namespace
// has no other UDP traffic): RcvbufErrors = dropped because the socket's
// receive buffer was full, InCsumErrors = dropped for a wrong checksum.
struct UdpSnmp {
    uint64_t rcvbufErrors = 0, inCsumErrors = 0;
};

UdpSnmp udpSnmp()
{
    UdpSnmp v;
    FILE* f = fopen("/proc/net/snmp", "r");
    if (!f)
        return v;
    char line[1024];
    bool header = true;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Udp: ", 5))
            continue;
        if (header) {
            header = false;
            continue;
        }
        unsigned long long in, noport, inerr, out, rcvbuf, sndbuf, csumerr;
        if (sscanf(line + 5, "%llu %llu %llu %llu %llu %llu %llu", &in, &noport, &inerr, &out, &rcvbuf, &sndbuf,
                   &csumerr) == 7)
            v = {rcvbuf, csumerr};
    }
    fclose(f);
    return v;
}

// Ordinary pageable memory (anonymous), prefaulted unless cold.
struct Pageable {
    uint8_t* p = nullptr;
    uint64_t len = 0;
    Pageable(uint64_t n, bool cold) : len(n)
    {
        void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            throwErrno("mmap " + std::to_string(n >> 20) + " MiB of receive memory");
        p = static_cast<uint8_t*>(m);
        if (!cold)
            std::memset(p, 0, n);
    }
    ~Pageable() { ::munmap(p, len); }
    Pageable(const Pageable&) = delete;
    Pageable& operator=(const Pageable&) = delete;
};

class KernelReceiver : public Receiver {
public:
    explicit KernelReceiver(const RxConfig& cfg)
        : cfg_(cfg), pass_(attachPassProgram(cfg)), mem_(cfg.regionSize, cfg.cold), fd_(udpSocket(cfg)),
          snmp0_(udpSnmp())
    {
    }
    ~KernelReceiver() override { stop(); }
    void start(std::vector<Meter*> meters) override
    {
        thread_ = std::thread([this, m = meters[0]] {
            npf::pinThread(cfg_.cpus[0], "npf-bench receiver");
            loop(*m);
        });
    }
    void stop() override
    {
        stop_.store(true);
        if (thread_.joinable())
            thread_.join();
    }
    uint64_t pinnedBytes() const override { return 0; }
    uint64_t residentBytes() const override { return residentOf(mem_.p, mem_.len); }
    std::string route() const override { return "socket"; }
    nlohmann::json details() const override
    {
        const UdpSnmp now = udpSnmp();
        return {{"udpRcvbufErrors", now.rcvbufErrors - snmp0_.rcvbufErrors},
                {"udpInCsumErrors", now.inCsumErrors - snmp0_.inCsumErrors}};
    }

protected:
    virtual void loop(Meter& m) = 0;
    RxConfig cfg_;
    std::shared_ptr<void> pass_;
    Pageable mem_;
    Fd fd_;
    UdpSnmp snmp0_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
};

class RecvmmsgReceiver final : public KernelReceiver {
public:
    using KernelReceiver::KernelReceiver;

private:
    void loop(Meter& m) override
    {
        constexpr unsigned kBatch = 64;
        mmsghdr msgs[kBatch]{};
        iovec iov[kBatch];
        uint64_t slot = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
            for (unsigned i = 0; i < kBatch; i++) {
                iov[i] = {mem_.p + cfg_.slotOffset(slot + i), cfg_.bufLen};
                msgs[i].msg_hdr.msg_iov = &iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            int n = ::recvmmsg(fd_.get(), msgs, kBatch, MSG_WAITFORONE, nullptr);
            if (n <= 0)
                continue;
            const uint64_t now = monotonicNs();
            uint64_t bytes = 0;
            for (int i = 0; i < n; i++) {
                m.onPayload(static_cast<uint8_t*>(iov[i].iov_base), msgs[i].msg_len, now);
                bytes += msgs[i].msg_len;
            }
            slot += unsigned(n);
            m.count(uint32_t(n), bytes, now);
        }
    }
};

class IoUringReceiver final : public KernelReceiver {
public:
    explicit IoUringReceiver(const RxConfig& cfg) : KernelReceiver(cfg)
    {
        io_uring_params p{};
        p.flags = IORING_SETUP_CQSIZE;
        p.cq_entries = 16384;
        if (int rc = io_uring_queue_init_params(256, &ring_, &p); rc < 0)
            throwErrno(-rc, "io_uring_queue_init");
        entries_ = 1;
        while (entries_ * 2 <= std::min<uint64_t>(32768, cfg.slots()))
            entries_ *= 2;
        brLen_ = entries_ * sizeof(io_uring_buf);
        void* br = ::mmap(nullptr, brLen_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
        if (br == MAP_FAILED)
            throwErrno("mmap the io_uring buffer ring");
        br_ = static_cast<io_uring_buf_ring*>(br);
        io_uring_buf_ring_init(br_);
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<uint64_t>(br_);
        reg.ring_entries = entries_;
        reg.bgid = 0;
        if (int rc = io_uring_register_buf_ring(&ring_, &reg, 0); rc < 0)
            throwErrno(-rc, "io_uring_register_buf_ring");
        for (uint32_t i = 0; i < entries_; i++)
            io_uring_buf_ring_add(br_, mem_.p + cfg.slotOffset(i), cfg.bufLen, uint16_t(i), io_uring_buf_ring_mask(entries_),
                                  int(i));
        io_uring_buf_ring_advance(br_, int(entries_));
    }
    ~IoUringReceiver() override
    {
        stop();
        io_uring_queue_exit(&ring_);
        ::munmap(br_, brLen_);
    }

private:
    void arm()
    {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        io_uring_prep_recv_multishot(sqe, fd_.get(), nullptr, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = 0;
        io_uring_submit(&ring_);
    }
    void loop(Meter& m) override
    {
        arm();
        const uint32_t mask = io_uring_buf_ring_mask(entries_);
        io_uring_cqe* cqes[64];
        while (!stop_.load(std::memory_order_relaxed)) {
            __kernel_timespec ts{0, 10000000};
            io_uring_cqe* c;
            if (io_uring_wait_cqe_timeout(&ring_, &c, &ts) < 0)
                continue;
            const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, 64);
            const uint64_t now = monotonicNs();
            uint64_t bytes = 0;
            uint32_t got = 0;
            int added = 0;
            bool rearm = false;
            for (unsigned i = 0; i < n; i++) {
                io_uring_cqe* cq = cqes[i];
                if (!(cq->flags & IORING_CQE_F_MORE))
                    rearm = true;
                if (cq->res <= 0 || !(cq->flags & IORING_CQE_F_BUFFER))
                    continue;
                const uint16_t bid = uint16_t(cq->flags >> IORING_CQE_BUFFER_SHIFT);
                uint8_t* buf = mem_.p + cfg_.slotOffset(bid);
                m.onPayload(buf, uint32_t(cq->res), now);
                bytes += uint64_t(cq->res);
                got++;
                io_uring_buf_ring_add(br_, buf, cfg_.bufLen, bid, mask, added++);
            }
            io_uring_buf_ring_advance(br_, added);
            io_uring_cq_advance(&ring_, n);
            if (got)
                m.count(got, bytes, now);
            if (rearm)
                arm();
        }
    }

    io_uring ring_{};
    io_uring_buf_ring* br_ = nullptr;
    size_t brLen_ = 0;
    uint32_t entries_ = 0;
};

} // namespace

std::unique_ptr<Receiver> makeRecvmmsgReceiver(const RxConfig& cfg) { return std::make_unique<RecvmmsgReceiver>(cfg); }
std::unique_ptr<Receiver> makeIoUringReceiver(const RxConfig& cfg) { return std::make_unique<IoUringReceiver>(cfg); }

} // namespace npf::bench
