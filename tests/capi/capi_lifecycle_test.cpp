// Ownership through the C API: npf_ctx_close closes the flows left open (its
// ports are free for the next engine); npf_flow_close hands a port back at once.
// And region_memory picks where an engine's region comes from.
#include <cstdio>
#include <fstream>
#include <string>

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

// The line of /proc/self/maps that maps `addr` ("" if none).
std::string mappingOf(const void* addr)
{
    std::ifstream maps("/proc/self/maps");
    const auto a = reinterpret_cast<uintptr_t>(addr);
    for (std::string line; std::getline(maps, line);) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi)
            return line;
    }
    return "";
}

TEST_F(EngineE2E, CApiRegionMemoryPicksWhereTheRegionComesFrom)
{
    Rig rig;
    const std::string ifname = rig.rxIf();
    // (AUTO is ANON, POOL or MEMFD by what the host offers: npf::Engine's tests.)
    for (const uint32_t memory : {NPF_REGION_MEMORY_POOL, NPF_REGION_MEMORY_MEMFD, NPF_REGION_MEMORY_ANON}) {
        SCOPED_TRACE("region_memory " + std::to_string(memory));
        npf_engine_opts o = engineOpts(ifname.c_str());
        o.region_memory = memory;
        CtxInNs ctx(rig, o);
        ASSERT_EQ(ctx.rc(), 0) << npf_strerror_last();
        const std::string line = mappingOf(npf_region(ctx.get(), nullptr));
        ASSERT_NE(line, "");
        // A memfd's mapping is named after it; the pool's private memory is anonymous.
        EXPECT_EQ(line.find("/memfd:") != std::string::npos, memory == NPF_REGION_MEMORY_MEMFD) << line;
    }
    npf_engine_opts o = engineOpts(ifname.c_str());
    o.region_memory = 4; // none of them
    CtxInNs bad(rig, o);
    EXPECT_NE(bad.rc(), 0);
    EXPECT_NE(std::string(npf_strerror_last()).find("_ANON"), std::string::npos) << npf_strerror_last();
}

} // namespace
} // namespace npf::e2e
