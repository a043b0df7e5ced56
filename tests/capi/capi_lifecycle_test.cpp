// Ownership through the C API: npf_ctx_close closes the flows left open (its
// ports are free for the next engine); npf_flow_close hands a port back at once.
#include "ctx_in_ns.h"

namespace npf::e2e {
namespace {

TEST_F(EngineE2E, CApiCtxCloseClosesTheFlowsLeftOpen)
{
    Rig rig;
    const std::string ifname = rig.rxIf();
    {
        CtxInNs ctx(rig, engineOpts(ifname.c_str()));
        ASSERT_EQ(ctx.rc(), 0) << npf_strerror_last();
        npf_flow_handle *a = nullptr, *b = nullptr;
        ASSERT_EQ(npf_flow_open(ctx.get(), 7430, nullptr, nullptr, &a), 0) << npf_strerror_last();
        ASSERT_EQ(npf_flow_open(ctx.get(), 7431, nullptr, nullptr, &b), 0) << npf_strerror_last();
        EXPECT_NE(npf_flow_id(a), npf_flow_id(b));
        ASSERT_EQ(npf_flow_post(a, 0, 2048, 1), 0);
        ASSERT_EQ(npf_flow_close(a), 0) << npf_strerror_last();
        // The port is free again at once, in the same context.
        ASSERT_EQ(npf_flow_open(ctx.get(), 7430, nullptr, nullptr, &a), 0) << npf_strerror_last();
        EXPECT_EQ(npf_flow_port(a), 7430);
        ctx.close(); // a and b with it
    }
    CtxInNs again(rig, engineOpts(ifname.c_str()));
    ASSERT_EQ(again.rc(), 0) << npf_strerror_last();
    npf_flow_handle* f = nullptr;
    EXPECT_EQ(npf_flow_open(again.get(), 7431, nullptr, nullptr, &f), 0)
        << "the port of a flow npf_ctx_close closed is not free: " << npf_strerror_last();
    EXPECT_EQ(npf_flow_close(f), 0);
}

} // namespace
} // namespace npf::e2e
