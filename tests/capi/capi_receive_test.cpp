// The C API end to end from C (capi_receive.c): an engine on the rx end of a
// veth pair, a flow-controlled stream of datagrams received by an epoll loop
// on npf_flow_event_fd + npf_flow_arm, every byte and cookie checked, the
// flow's and the engine's counters read through the C structs.
#include <cstring>

#include "capi_receive.h"
#include "engine_fixture.h"

namespace npf::e2e {
namespace {

constexpr uint16_t kPort = 7410;
constexpr uint32_t kCount = 5000, kSlots = 1024, kSize = 300;
uint32_t size300(uint32_t) { return kSize; }

struct Receiver {
    Sender& tx;
    std::atomic<uint64_t> done{0};
};

// capi_receive with npf_engine_opts.flags = flags: every datagram, byte for
// byte, with its cookie, and the C counters agree.

void epollReceiver(uint32_t flags)
{
    Rig rig;
    Sender tx(rig.veth(), {.sender = 0, .count = kCount, .dstPort = kPort, .size = size300});
    Receiver rx{tx};
    tx.flowControl(kSlots / 2, [&] { return rx.done.load(); });

    capi_run r{};
    r.ifname = rig.rxIf().c_str();
    r.port = kPort;
    r.count = kCount;
    r.slots = kSlots;
    r.buf = 2048;
    r.flags = flags;
    r.deadline_ms = int(test::kDeadline.count());
    r.arg = &rx;
    r.ready = [](void* a) { static_cast<Receiver*>(a)->tx.start(); };
    r.check = [](void*, const npf_completion* c, const uint8_t* bytes) {
        const std::vector<uint8_t> want = payloadFor(senderId(0, uint32_t(c->seq)), kSize);
        return int(c->len != want.size() || std::memcmp(bytes, want.data(), want.size()) != 0);
    };
    r.done = [](void* a) { static_cast<Receiver*>(a)->done++; };
    int rc;
    {
        // The engine is made and destroyed in the rx namespace, as EngineInNs does.
        test::NetnsGuard in(rig.veth().rxNs());
        rc = capi_receive(&r);
    }
    tx.join();
    ASSERT_EQ(rc, 0) << r.error;
    ASSERT_EQ(tx.error(), "");
    EXPECT_EQ(r.ok, kCount);
    EXPECT_EQ(r.other_status, 0u);
    EXPECT_EQ(r.wrong_cookie, 0u);
    EXPECT_EQ(r.wrong_bytes, 0u);
    EXPECT_EQ(r.populated, int64_t(kSlots / 2 * 2048 / 4096)) << "npf_populate of a cold region";
    EXPECT_EQ(r.flow.sz, sizeof(r.flow)) << "npf_flow_read_counters changed the caller's sz";
    EXPECT_EQ(r.flow.reached, kCount) << describe(rig.xdp());
    EXPECT_EQ(r.flow.claimed, kCount);
    EXPECT_EQ(r.flow.completed_ok, kCount);
    EXPECT_EQ(r.flow.in_flight, 0u);
    EXPECT_EQ(r.flow.xdp[NPF_STAT_REDIR_PRIMARY - NPF_STAT_FLOW_FIRST] +
                  r.flow.xdp[NPF_STAT_REDIR_BACKUP - NPF_STAT_FLOW_FIRST],
              kCount);
    EXPECT_EQ(r.engine.completed_ok, kCount);
    EXPECT_EQ(r.engine.fast_path + r.engine.fault_path, kCount);
    std::printf("[ numbers  ] %u datagrams, %llu epoll sleeps, fast %llu, fault %llu\n", kCount,
                (unsigned long long)r.sleeps, (unsigned long long)r.engine.fast_path,
                (unsigned long long)r.engine.fault_path);
}

TEST_F(EngineE2E, CApiEpollReceiverGetsEveryDatagram) { epollReceiver(0); }

// The same loop with NPF_ENGINE_F_RUN_TO_COMPLETION: its npf_flow_poll and
// npf_flow_arm run the fast path, the event fd wakes it for datagrams.
TEST_F(EngineE2E, CApiEpollReceiverRunningToCompletionGetsEveryDatagram)
{
    epollReceiver(NPF_ENGINE_F_RUN_TO_COMPLETION);
}

} // namespace
} // namespace npf::e2e
