// Bad input through the C API (npf/npf.h, here from C++): NULL handles and
// options, versioned structs of the wrong size, a region that is not a page
// multiple, posts outside the region and on a full ring, a wait that times
// out, and a flow whose interface is deleted. Every failure is a negative
// errno with words in npf_strerror_last(); no exception escapes.
#include <cerrno>
#include <string>
#include <thread>

#include "ctx_in_ns.h"

namespace npf::e2e {
namespace {

std::string last() { return npf_strerror_last(); }

// This thread's last failure message contains `words`.
::testing::AssertionResult lastSays(const std::string& words)
{
    if (last().find(words) != std::string::npos)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "npf_strerror_last() is '" << last() << "', without '" << words << "'";
}

TEST(CApiArgs, NullHandlesAreEinvalNotCrashes)
{
    npf_ctx* ctx = reinterpret_cast<npf_ctx*>(1);
    EXPECT_EQ(npf_engine_open(nullptr, &ctx), -EINVAL);
    EXPECT_EQ(ctx, nullptr) << "*out is cleared on failure";
    EXPECT_TRUE(lastSays("npf_engine_opts is NULL"));
    const npf_engine_opts o = engineOpts("lo");
    EXPECT_EQ(npf_engine_open(&o, nullptr), -EINVAL);
    EXPECT_EQ(npf_client_open(nullptr, &ctx), -EINVAL);

    npf_completion c[1];
    char buf[16];
    EXPECT_EQ(npf_flow_open(nullptr, 7400, nullptr, nullptr, nullptr), -EINVAL);
    EXPECT_EQ(npf_flow_post(nullptr, 0, 2048, 0), -EINVAL);
    EXPECT_EQ(npf_flow_poll(nullptr, c, 1), -EINVAL);
    EXPECT_EQ(npf_flow_wait(nullptr, c, 1, 0), -EINVAL);
    EXPECT_EQ(npf_flow_arm(nullptr), -EINVAL);
    EXPECT_EQ(npf_flow_event_fd(nullptr), -EINVAL);
    EXPECT_EQ(npf_flow_failure(nullptr, buf, sizeof(buf)), -EINVAL);
    npf_flow_counters fc{};
    fc.sz = sizeof(fc);
    EXPECT_EQ(npf_flow_read_counters(nullptr, &fc), -EINVAL);
    EXPECT_TRUE(lastSays("flow is NULL"));
    EXPECT_EQ(npf_flow_outstanding(nullptr), UINT64_MAX);
    EXPECT_EQ(npf_flow_port(nullptr), 0u);
    EXPECT_EQ(npf_flow_id(nullptr), NPF_FLOW_ID_NONE);
    npf_flow_flush(nullptr);
    EXPECT_EQ(npf_flow_close(nullptr), 0);

    uint64_t size = 1;
    EXPECT_EQ(npf_region(nullptr, &size), nullptr);
    EXPECT_EQ(size, 0u);
    EXPECT_EQ(npf_release(nullptr, 0, 1), -EINVAL);
    EXPECT_EQ(npf_populate(nullptr, 0, 1), -EINVAL);
    EXPECT_EQ(npf_ctx_failure(nullptr, buf, sizeof(buf)), -EINVAL);
    EXPECT_EQ(npf_ctx_mode(nullptr), -EINVAL);
    npf_ctx_counters cc{};
    cc.sz = sizeof(cc);
    EXPECT_EQ(npf_ctx_read_counters(nullptr, &cc), -EINVAL);
    npf_ctx_close(nullptr);
}

// sz below the first version's is refused; above it, a zero tail is accepted
// (the open then fails on what follows: here the region size) and a non-zero
// one refused with -E2BIG.
TEST(CApiArgs, OptionStructsAreVersionedBySz)
{
    npf_ctx* ctx = nullptr;
    npf_engine_opts o = engineOpts("lo");
    o.sz = offsetof(npf_engine_opts, region_memory) - 1; // less than the first C API's struct
    EXPECT_EQ(npf_engine_open(&o, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("npf_engine_opts.sz"));
    // The first C API's struct (it ended at spill_dir) is read, region_memory AUTO.
    o.sz = offsetof(npf_engine_opts, region_memory);
    o.region_size = 4097;
    o.region_memory = 7; // beyond that sz: not read
    EXPECT_EQ(npf_engine_open(&o, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("multiple of 4096")) << "the older struct gets as far as the region's size";
    o = engineOpts("lo");
    o.region_memory = 7;
    EXPECT_EQ(npf_engine_open(&o, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("region_memory 7 is none of"));

    struct Newer {
        npf_engine_opts v0;
        uint64_t added;
    } newer{engineOpts("lo"), 0};
    newer.v0.sz = sizeof(newer);
    newer.v0.region_size = 4097;
    EXPECT_EQ(npf_engine_open(&newer.v0, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("multiple of 4096")) << "a zero tail is accepted";
    newer.added = 1;
    EXPECT_EQ(npf_engine_open(&newer.v0, &ctx), -E2BIG);
    EXPECT_TRUE(lastSays("does not know"));

    npf_client_opts c{};
    c.sz = sizeof(c) / 2;
    EXPECT_EQ(npf_client_open(&c, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("npf_client_opts.sz"));
    c.sz = sizeof(c);
    c.socket = "/nonexistent/npfd.sock";
    EXPECT_LT(npf_client_open(&c, &ctx), 0);
    EXPECT_TRUE(lastSays("/nonexistent/npfd.sock"));
    EXPECT_EQ(ctx, nullptr);
    // A mode there is none of; and the first version's size (no mode) is still taken.
    c.mode = 3;
    EXPECT_EQ(npf_client_open(&c, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("npf_client_opts.mode 3"));
    c.mode = 0;
    c.sz = offsetof(npf_client_opts, mode);
    EXPECT_LT(npf_client_open(&c, &ctx), 0);
    EXPECT_TRUE(lastSays("/nonexistent/npfd.sock")) << "a first-version caller gets past the options";
}

TEST(CApiArgs, EngineOptionsAreChecked)
{
    npf_ctx* ctx = nullptr;
    npf_engine_opts o = engineOpts(nullptr);
    EXPECT_EQ(npf_engine_open(&o, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("ifname"));
    o = engineOpts("lo");
    o.region_size = (4ull << 20) + 100;
    EXPECT_EQ(npf_engine_open(&o, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("multiple of 4096"));
    o = engineOpts("lo");
    o.xdp_mode = 7;
    EXPECT_EQ(npf_engine_open(&o, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("xdp_mode"));
    o = engineOpts("lo");
    o.flags = 0x100;
    EXPECT_EQ(npf_engine_open(&o, &ctx), -EINVAL);
    EXPECT_TRUE(lastSays("flags"));
    EXPECT_EQ(ctx, nullptr);
}

TEST(CApiArgs, TheLastErrorIsPerThread)
{
    EXPECT_EQ(npf_flow_arm(nullptr), -EINVAL);
    std::thread([] { EXPECT_EQ(npf_release(nullptr, 0, 1), -EINVAL); }).join();
    EXPECT_TRUE(lastSays("npf_flow_arm")) << "another thread's failure replaced this thread's message";
}

TEST_F(EngineE2E, CApiMissingInterfaceIsEnodev)
{
    Rig rig;
    CtxInNs ctx(rig, engineOpts("npf-nosuchif"));
    EXPECT_EQ(ctx.rc(), -ENODEV) << last();
    EXPECT_TRUE(lastSays("npf-nosuchif"));
    EXPECT_EQ(ctx.get(), nullptr);
}

TEST_F(EngineE2E, CApiBadPostsTimeoutAndInterfaceLoss)
{
    Rig rig;
    const std::string ifname = rig.rxIf();
    CtxInNs ctx(rig, engineOpts(ifname.c_str()));
    ASSERT_EQ(ctx.rc(), 0) << last();
    npf_flow_handle* f = nullptr;
    EXPECT_EQ(npf_flow_open(ctx.get(), 7420, nullptr, "npf-other0", &f), -EINVAL);
    EXPECT_TRUE(lastSays("this engine serves " + ifname));
    ASSERT_EQ(npf_flow_open(ctx.get(), 7420, nullptr, ifname.c_str(), &f), 0) << last();

    uint64_t size = 0;
    ASSERT_NE(npf_region(ctx.get(), &size), nullptr);
    ASSERT_EQ(size, 4ull << 20);
    EXPECT_EQ(npf_flow_post(f, size, 2048, 0), -EINVAL);
    EXPECT_TRUE(lastSays("outside the region"));
    EXPECT_EQ(npf_flow_post(f, size - 1024, 2048, 0), -EINVAL);
    EXPECT_EQ(npf_flow_post(f, 0, 0, 0), -EINVAL);
    EXPECT_EQ(npf_release(ctx.get(), size, 4096), -EINVAL) << last();
    npf_flow_counters small{};
    small.sz = sizeof(size_t);
    EXPECT_EQ(npf_flow_read_counters(f, &small), -EINVAL);
    EXPECT_TRUE(lastSays("npf_flow_counters.sz"));

    for (uint32_t i = 0; i < NPF_POST_RING_SIZE; i++)
        ASSERT_EQ(npf_flow_post(f, uint64_t(i) * 1024, 1024, i), 0) << i << ": " << last();
    EXPECT_EQ(npf_flow_post(f, 0, 1024, 0), -EAGAIN);
    EXPECT_TRUE(lastSays("post ring full"));
    EXPECT_EQ(npf_flow_outstanding(f), uint64_t(NPF_POST_RING_SIZE));

    npf_completion c[4];
    EXPECT_EQ(npf_flow_wait(f, c, 4, 20), 0) << "a timeout is 0";
    EXPECT_EQ(npf_flow_poll(f, c, 4), 0);
    ASSERT_EQ(npf_flow_arm(f), 0);

    ASSERT_EQ(test::sh(rig.veth().rxNs().exec() + "ip link del " + ifname), 0);
    EXPECT_TRUE(test::waitUntil([&] { return npf_flow_poll(f, c, 4) == -ENODEV; })) << last();
    EXPECT_NE(last(), "") << "no words for -ENODEV";
    EXPECT_EQ(npf_flow_arm(f), -ENODEV);
    EXPECT_EQ(npf_flow_wait(f, c, 4, 20000), -ENODEV);
    char why[256];
    EXPECT_GT(npf_flow_failure(f, why, sizeof(why)), 0);
    EXPECT_EQ(last(), why) << "npf_strerror_last is the flow's failure";
    EXPECT_GT(npf_ctx_failure(ctx.get(), why, sizeof(why)), 0);
    // Cut short like snprintf: the whole length, a terminated prefix.
    char tiny[4];
    EXPECT_GT(npf_ctx_failure(ctx.get(), tiny, sizeof(tiny)), 3);
    EXPECT_EQ(std::strlen(tiny), 3u);
    (void)npf_flow_close(f); // the flow is freed whatever the engine says now
}

} // namespace
} // namespace npf::e2e
