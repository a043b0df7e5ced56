// No false LOST: a datagram that XDP claimed but that reaches its AF_XDP ring
// late (the NAPI poll that redirected it is held up before it publishes the
// ring) completes OK, never LOST, however long the reorder timeout is exceeded.
// The hold-up is real: a tc ingress program spins on packets that the same
// poll passes to the stack after the flow datagram (slow_ingress.bpf.c).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <thread>

#include "engine_fixture.h"
#include "packet_builder.h"
#include "slow_ingress.skel.h"

namespace npf::e2e {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kPort = 7400;
constexpr uint16_t kSlowPort = 7401;
// net.core.gro_normal_batch: passed packets are handed to the stack in
// batches of this many inside the poll.
constexpr int kSlowAfter = 8;

void pinTo(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

uint64_t nowNs()
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
}

// slow_ingress on the rx veth's tc ingress, spinning about `delay` per slow packet.
class SlowIngress {
public:
    SlowIngress(Rig& rig, std::chrono::milliseconds delay)
    {
        skel_ = slow_ingress__open();
        if (!skel_)
            throw std::runtime_error("open slow_ingress");
        skel_->rodata->npf_slow_port = kSlowPort;
        skel_->rodata->npf_spin_loops = 1u << 23;
        if (slow_ingress__load(skel_))
            throw std::runtime_error("load slow_ingress");
        // Calibrate on this machine: one run of the maximum loop count.
        const std::vector<uint8_t> pkt =
            test::PacketBuilder().eth().ipv4().udp({.dport = kSlowPort}).payloadPattern(16).build();
        LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = pkt.data(), .data_size_in = uint32_t(pkt.size()));
        const uint64_t t0 = nowNs();
        if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.npf_slow_ingress), &run) != 0)
            throw std::runtime_error("test-run slow_ingress");
        perRunNs_ = nowNs() - t0;
        skel_->bss->npf_slow_seen = 0;
        // The loop count is read-only after load: a longer delay means more packets.
        packetsPerDelay_ = std::max<uint64_t>(1, uint64_t(std::chrono::nanoseconds(delay).count()) / perRunNs_ + 1);

        test::NetnsGuard in(rig.veth().rxNs());
        hook_.ifindex = static_cast<int>(if_nametoindex(rig.rxIf().c_str()));
        hook_.attach_point = BPF_TC_INGRESS;
        int rc = bpf_tc_hook_create(&hook_);
        if (rc && rc != -EEXIST)
            throw std::runtime_error("tc hook on " + rig.rxIf());
        opts_.prog_fd = bpf_program__fd(skel_->progs.npf_slow_ingress);
        if (bpf_tc_attach(&hook_, &opts_) != 0)
            throw std::runtime_error("tc attach on " + rig.rxIf());
    }
    ~SlowIngress() { slow_ingress__destroy(skel_); } // the hook goes with the namespace

    uint64_t seen() const { return __atomic_load_n(&skel_->bss->npf_slow_seen, __ATOMIC_ACQUIRE); }
    uint64_t perRunNs() const { return perRunNs_; }
    uint64_t packetsPerDelay() const { return packetsPerDelay_; }

private:
    slow_ingress* skel_ = nullptr;
    bpf_tc_hook hook_{.sz = sizeof(bpf_tc_hook)};
    bpf_tc_opts opts_{.sz = sizeof(bpf_tc_opts)};
    uint64_t perRunNs_ = 1;
    uint64_t packetsPerDelay_ = 1;
};

uint32_t size200(uint32_t) { return 200; }

TEST_F(EngineE2E, DatagramHeldBetweenXdpAndItsRingIsNotLost)
{
    if (std::thread::hardware_concurrency() < 2)
        GTEST_SKIP() << "needs two CPUs: one holds the NAPI poll, the other runs the engine";
    Rig rig;
    EngineConfig cfg{.regionSize = 16ull << 20};
    cfg.reorderTimeout = 1ms;
    cfg.workerCpus = {0};
    cfg.pagerCpus = {0};
    EngineInNs eng(rig, cfg);
    Flow& flow = eng->openFlow(kPort);
    eng->populate(0, 16ull << 20);
    Checker chk(*eng, flow, {.stride = 2048, .depth = 64}, size200, true);
    chk.postInitial();
    SlowIngress slow(rig, 20ms);
    std::printf("slow_ingress: %.1f ms per packet; %llu packet(s) per hold-up\n", slow.perRunNs() / 1e6,
                static_cast<unsigned long long>(slow.packetsPerDelay()));

    Sender flowTx(rig.veth(), {.count = 1, .dstPort = kPort, .size = size200});
    Sender slowTx(rig.veth(), {.sender = 2, .dstPort = kSlowPort, .size = size200});
    pinTo(0);
    // CPU 1 sends a slow packet: its NAPI poll now spins in tc ingress and
    // stays scheduled, so what CPU 0 sends next is taken by the next poll on
    // CPU 1, which claims the flow datagram, then spins on the slow ones
    // before it publishes the ring.
    std::thread holder([&] {
        pinTo(1);
        for (uint64_t i = 0; i < slow.packetsPerDelay(); i++)
            slowTx.sendOne(senderId(2, uint32_t(i)), 200);
    });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (slow.seen() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    ASSERT_GT(slow.seen(), 0u) << "the holding packet never reached tc ingress";
    flowTx.sendOne(senderId(0, 0), 200);
    for (uint64_t i = 0; i < kSlowAfter * slow.packetsPerDelay(); i++)
        slowTx.sendOne(senderId(2, uint32_t(1000 + i)), 200);
    holder.join();

    chk.pumpUntil(1);
    const CheckTotals& t = chk.totals();
    const EngineStats s = eng->stats();
    EXPECT_EQ(t.failures, 0u) << t.firstFailures;
    EXPECT_EQ(t.lost, 0u) << "the datagram was only late, it was not dropped";
    EXPECT_EQ(t.verified, 1u);
    EXPECT_EQ(s.late, 0u);
    // The premise: XDP steered the datagram well over the reorder timeout
    // before the worker could see it.
    EXPECT_GT(s.fastTotal.max, 10 * uint64_t(std::chrono::nanoseconds(cfg.reorderTimeout).count()))
        << "the datagram was not held between XDP and its ring: the test proved nothing (" << numbers(s) << ")";
    std::printf("held %.1f ms between XDP and the application\n", s.fastTotal.max / 1e6);
}

} // namespace
} // namespace npf::e2e
