// The contexts of npf/npf.h: an npf::Engine or an npf::Client behind one
// handle, their region and counters.
#include <cstddef>
#include <cstring>
#include <iterator>
#include <utility>

#include "capi/error.h"
#include "capi/handles.h"
#include "capi/sized_struct.h"

using npf::capi::fail;
using npf::capi::guarded;

npf::Flow& npf_ctx::openFlow(uint16_t port, const npf::FlowOptions& opts, const std::string& iface)
{
    if (client)
        return client->openFlow(port, opts, iface);
    if (!iface.empty() && iface != ifname)
        throw std::invalid_argument("open flow " + std::to_string(port) + " on " + iface + ": this engine serves " +
                                    ifname);
    return engine->openFlow(port, opts);
}

void npf_ctx::closeFlow(npf::Flow& f)
{
    if (client)
        client->closeFlow(f);
    else
        engine->closeFlow(f);
}

namespace {

// The versions of the structs (npf/npf.h, "Versioned structs"). Their layout
// is the ABI: a change to any offset or size here breaks callers built
// against an earlier header.
//
// npf_engine_opts: the first C API's ended at spill_dir; the second at
// region_memory (and its tail padding); the third at reserve.
constexpr size_t kEngineOptsV1 = offsetof(npf_engine_opts, region_memory);
static_assert(kEngineOptsV1 == offsetof(npf_engine_opts, spill_dir) + sizeof(const char*));
constexpr size_t roundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }
constexpr size_t kEngineOptsV2 =
    roundUp(offsetof(npf_engine_opts, region_memory) + sizeof(uint32_t), alignof(npf_engine_opts));
// reserve starts past the second version's tail padding (its `size_t :0;`).
static_assert(offsetof(npf_engine_opts, reserve) == kEngineOptsV2);
static_assert(sizeof(npf_engine_opts) == kEngineOptsV2 + sizeof(uint64_t));
// npf_client_opts: the first version ended at timeout_ms (and its tail
// padding); the second at mode.
constexpr size_t kClientOptsV1 =
    roundUp(offsetof(npf_client_opts, timeout_ms) + sizeof(uint32_t), alignof(npf_client_opts));
static_assert(offsetof(npf_client_opts, mode) == kClientOptsV1);
static_assert(sizeof(npf_client_opts) ==
              roundUp(offsetof(npf_client_opts, mode) + sizeof(uint32_t), alignof(npf_client_opts)));
// npf_ctx_counters: no tail padding (npf/npf.h says so).
static_assert(sizeof(npf_ctx_counters) == offsetof(npf_ctx_counters, kernel_rx_dropped) + sizeof(uint64_t));
#if defined(__x86_64__) || defined(__aarch64__) || (defined(__riscv) && __riscv_xlen == 64)
// LP64, as libnpf is built and tested: the numbers themselves.
static_assert(offsetof(npf_engine_opts, ifname) == 8 && offsetof(npf_engine_opts, region_size) == 16 &&
              offsetof(npf_engine_opts, resident_budget) == 24 && offsetof(npf_engine_opts, page_size) == 32 &&
              offsetof(npf_engine_opts, queues) == 40 && offsetof(npf_engine_opts, xdp_mode) == 44 &&
              offsetof(npf_engine_opts, pager_threads) == 48 && offsetof(npf_engine_opts, flags) == 52 &&
              offsetof(npf_engine_opts, spill_dir) == 56 && offsetof(npf_engine_opts, region_memory) == 64 &&
              offsetof(npf_engine_opts, reserve) == 72);
static_assert(kEngineOptsV1 == 64 && kEngineOptsV2 == 72 && sizeof(npf_engine_opts) == 80);
static_assert(offsetof(npf_client_opts, socket) == 8 && offsetof(npf_client_opts, name) == 16 &&
              offsetof(npf_client_opts, region_size) == 24 && offsetof(npf_client_opts, resident_budget) == 32 &&
              offsetof(npf_client_opts, page_size) == 40 && offsetof(npf_client_opts, timeout_ms) == 48 &&
              kClientOptsV1 == 56 && offsetof(npf_client_opts, mode) == 56 && sizeof(npf_client_opts) == 64);
static_assert(offsetof(npf_ctx_counters, completed_ok) == 8 && offsetof(npf_ctx_counters, kernel_rx_dropped) == 104 &&
              sizeof(npf_ctx_counters) == 112);
#endif

npf::EngineConfig engineConfig(const npf_engine_opts& o)
{
    if (!o.ifname)
        throw std::invalid_argument("npf_engine_opts.ifname is NULL: name the interface");
    if (o.xdp_mode != NPF_XDP_NATIVE && o.xdp_mode != NPF_XDP_SKB)
        throw std::invalid_argument("npf_engine_opts.xdp_mode " + std::to_string(o.xdp_mode) +
                                    " is neither NPF_XDP_NATIVE nor NPF_XDP_SKB");
    constexpr uint32_t known =
        NPF_ENGINE_F_NO_UDP_CSUM | NPF_ENGINE_F_PAGER_BUSY_POLL | NPF_ENGINE_F_RUN_TO_COMPLETION;
    if (o.flags & ~known)
        throw std::invalid_argument("npf_engine_opts.flags has unknown bits " + std::to_string(o.flags & ~known));
    npf::EngineConfig cfg;
    cfg.ifname = o.ifname;
    cfg.mode = o.xdp_mode == NPF_XDP_SKB ? npf::XdpMode::Skb : npf::XdpMode::Native;
    cfg.queues = o.queues;
    if (o.region_size)
        cfg.regionSize = o.region_size;
    cfg.residentBudget = o.resident_budget;
    if (o.page_size)
        cfg.pageSize = o.page_size;
    if (o.pager_threads)
        cfg.pagerThreads = o.pager_threads;
    cfg.verifyUdpChecksum = !(o.flags & NPF_ENGINE_F_NO_UDP_CSUM);
    cfg.pagerBusyPoll = o.flags & NPF_ENGINE_F_PAGER_BUSY_POLL;
    cfg.runToCompletion = o.flags & NPF_ENGINE_F_RUN_TO_COMPLETION;
    if (o.spill_dir)
        cfg.spillDir = o.spill_dir;
    cfg.reserve = o.reserve;
    switch (o.region_memory) {
    case NPF_REGION_MEMORY_AUTO:
        cfg.regionMemory = npf::RegionMemory::Auto;
        break;
    case NPF_REGION_MEMORY_POOL:
        cfg.regionMemory = npf::RegionMemory::PagePool;
        break;
    case NPF_REGION_MEMORY_MEMFD:
        cfg.regionMemory = npf::RegionMemory::Memfd;
        break;
    case NPF_REGION_MEMORY_ANON:
        cfg.regionMemory = npf::RegionMemory::Anonymous;
        break;
    default:
        throw std::invalid_argument("npf_engine_opts.region_memory " + std::to_string(o.region_memory) +
                                    " is none of NPF_REGION_MEMORY_AUTO, _POOL, _MEMFD, _ANON");
    }
    return cfg;
}

npf::ClientConfig clientConfig(const npf_client_opts& o)
{
    npf::ClientConfig cfg;
    if (o.socket)
        cfg.socket = o.socket;
    if (o.name)
        cfg.name = o.name;
    if (o.region_size)
        cfg.regionSize = o.region_size;
    cfg.residentBudget = o.resident_budget;
    if (o.page_size)
        cfg.pageSize = o.page_size;
    if (o.timeout_ms)
        cfg.timeout = std::chrono::milliseconds(o.timeout_ms);
    cfg.mode = o.mode == NPF_CLIENT_MODE_DELEGATED  ? npf::ClientMode::Delegated
               : o.mode == NPF_CLIENT_MODE_BROKERED ? npf::ClientMode::Brokered
                                                    : npf::ClientMode::Auto;
    return cfg;
}

// Each npf_ctx_counters field and the EngineStats member it is: every field
// once (the static_assert below fails when the struct grows without it).
constexpr std::pair<uint64_t npf_ctx_counters::*, uint64_t npf::EngineStats::*> kCtxCounters[] = {
    {&npf_ctx_counters::completed_ok, &npf::EngineStats::completedOk},
    {&npf_ctx_counters::completed_truncated, &npf::EngineStats::completedTruncated},
    {&npf_ctx_counters::completed_lost, &npf::EngineStats::completedLost},
    {&npf_ctx_counters::completed_bad_csum, &npf::EngineStats::completedBadCsum},
    {&npf_ctx_counters::fast_path, &npf::EngineStats::fastPath},
    {&npf_ctx_counters::fault_path, &npf::EngineStats::faultPath},
    {&npf_ctx_counters::cpu_faults, &npf::EngineStats::cpuFaults},
    {&npf_ctx_counters::packet_faults, &npf::EngineStats::packetFaults},
    {&npf_ctx_counters::evicted, &npf::EngineStats::evicted},
    {&npf_ctx_counters::restored, &npf::EngineStats::restored},
    {&npf_ctx_counters::resident_pages, &npf::EngineStats::residentPages},
    {&npf_ctx_counters::pinned_bytes, &npf::EngineStats::pinnedBytes},
    {&npf_ctx_counters::kernel_rx_dropped, &npf::EngineStats::kernelRxDropped},
};
static_assert(sizeof(size_t) + std::size(kCtxCounters) * sizeof(uint64_t) == sizeof(npf_ctx_counters),
              "a field of npf_ctx_counters that kCtxCounters does not fill");

} // namespace

int npf_engine_open(const struct npf_engine_opts* opts, npf_ctx** out)
{
    return guarded([&] {
        if (!out)
            return fail(EINVAL, "npf_engine_open: out is NULL");
        *out = nullptr;
        npf_engine_opts o;
        if (int rc = npf::capi::readOptions(opts, &o, kEngineOptsV1, "npf_engine_opts"))
            return rc;
        auto ctx = std::make_unique<npf_ctx>();
        const npf::EngineConfig cfg = engineConfig(o);
        ctx->ifname = cfg.ifname;
        ctx->engine = std::make_unique<npf::Engine>(cfg);
        *out = ctx.release();
        return 0;
    });
}

int npf_client_open(const struct npf_client_opts* opts, npf_ctx** out)
{
    return guarded([&] {
        if (!out)
            return fail(EINVAL, "npf_client_open: out is NULL");
        *out = nullptr;
        npf_client_opts o;
        if (int rc = npf::capi::readOptions(opts, &o, kClientOptsV1, "npf_client_opts"))
            return rc;
        if (o.mode > NPF_CLIENT_MODE_BROKERED)
            return fail(EINVAL, "npf_client_opts.mode " + std::to_string(o.mode) +
                                    " is not an NPF_CLIENT_MODE_ (0 auto, 1 delegated, 2 brokered)");
        auto ctx = std::make_unique<npf_ctx>();
        ctx->client = std::make_unique<npf::Client>(clientConfig(o));
        *out = ctx.release();
        return 0;
    });
}

int npf_ctx_mode(const npf_ctx* ctx)
{
    if (!ctx)
        return fail(EINVAL, "npf_ctx_mode: ctx is NULL");
    if (!ctx->client)
        return NPF_CTX_MODE_IN_PROCESS;
    return ctx->client->mode() == npf::ClientMode::Delegated ? NPF_CLIENT_MODE_DELEGATED : NPF_CLIENT_MODE_BROKERED;
}

void npf_ctx_close(npf_ctx* ctx)
{
    npf::capi::KeepErrno keep;
    delete ctx;
}

void* npf_region(const npf_ctx* ctx, uint64_t* size)
{
    if (!ctx) {
        if (size)
            *size = 0;
        fail(EINVAL, "npf_region: ctx is NULL");
        return nullptr;
    }
    if (size)
        *size = ctx->client ? ctx->client->regionSize() : ctx->engine->regionSize();
    return ctx->client ? ctx->client->region() : ctx->engine->region();
}

int npf_release(npf_ctx* ctx, uint64_t offset, uint64_t len)
{
    if (!ctx)
        return fail(EINVAL, "npf_release: ctx is NULL");
    return guarded([&] {
        if (ctx->client)
            ctx->client->release(offset, len);
        else
            ctx->engine->release(offset, len);
        return 0;
    });
}

int64_t npf_populate(npf_ctx* ctx, uint64_t offset, uint64_t len)
{
    if (!ctx)
        return fail(EINVAL, "npf_populate: ctx is NULL");
    return guarded([&]() -> int64_t {
        return int64_t(ctx->client ? ctx->client->populate(offset, len) : ctx->engine->populate(offset, len));
    });
}

int npf_ctx_failure(const npf_ctx* ctx, char* buf, size_t len)
{
    if (!ctx)
        return fail(EINVAL, "npf_ctx_failure: ctx is NULL");
    return guarded([&] {
        return npf::capi::copyMessage(ctx->client ? ctx->client->failure() : ctx->engine->failure(), buf, len);
    });
}

int npf_ctx_read_counters(npf_ctx* ctx, struct npf_ctx_counters* out)
{
    if (!ctx)
        return fail(EINVAL, "npf_ctx_read_counters: ctx is NULL");
    return guarded([&] {
        const npf::EngineStats s = ctx->client ? ctx->client->stats() : ctx->engine->stats();
        npf_ctx_counters c{};
        for (const auto& [to, from] : kCtxCounters)
            c.*to = s.*from;
        return npf::capi::writeCounters(c, out, sizeof(npf_ctx_counters), "npf_ctx_counters");
    });
}
