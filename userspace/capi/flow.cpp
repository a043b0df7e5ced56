// The flows of npf/npf.h: npf::Flow behind a handle its context owns.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>

#include "capi/error.h"
#include "capi/handles.h"
#include "capi/sized_struct.h"

using npf::capi::fail;
using npf::capi::guarded;

static_assert(NPF_FLOW_STAT_MAX <= NPF_FLOW_COUNTERS_XDP, "npf_flow_counters.xdp has no room for every outcome");
// NPF_FLOW_ID_NONE is no flow's id: they index npf_xdp's maps of NPF_MAX_FLOWS.
static_assert(NPF_FLOW_ID_NONE == 0xffffffffu && uint64_t{NPF_MAX_FLOWS} <= uint64_t{NPF_FLOW_ID_NONE});
// npf_flow_counters' layout is the ABI (npf/npf.h, "Versioned structs"): no
// tail padding, and on LP64 these offsets.
static_assert(sizeof(npf_flow_counters) == offsetof(npf_flow_counters, credit_limit) + sizeof(uint64_t));
#if defined(__x86_64__) || defined(__aarch64__) || (defined(__riscv) && __riscv_xlen == 64)
static_assert(offsetof(npf_flow_counters, xdp) == 8 && offsetof(npf_flow_counters, completed_ok) == 264 &&
              offsetof(npf_flow_counters, rejected) == 320 && offsetof(npf_flow_counters, reached) == 328 &&
              offsetof(npf_flow_counters, socket_dropped) == 368 && offsetof(npf_flow_counters, credits_sent) == 376 &&
              sizeof(npf_flow_counters) == 408);
#endif

namespace {

// A failed poll/wait/arm: the flow's own words for it.
int flowFailed(const npf_flow_handle* f, int rc) noexcept
{
    return guarded([&] {
        const std::string why = f->flow->failure();
        return fail(-rc, why.empty() ? std::string("flow ") + std::to_string(f->flow->port()) + ": " +
                                           std::strerror(-rc)
                                     : why);
    });
}

// The flow's result as the C API returns it: a count, or a negative errno with its words.
int flowResult(const npf_flow_handle* f, int rc) noexcept { return rc < 0 ? flowFailed(f, rc) : rc; }

int nullFlow(const char* fn) noexcept { return fail(EINVAL, std::string(fn) + ": flow is NULL"); }

int openFlow(npf_ctx* ctx, uint16_t port, const npf::FlowOptions& opts, const char* iface, npf_flow_handle** out)
{
    return guarded([&] {
        *out = nullptr;
        // The node is allocated before the flow is opened: once it is, nothing can fail.
        std::list<npf_flow_handle> node(1);
        npf_flow_handle& h = node.front();
        h.ctx = ctx;
        h.self = node.begin();
        h.flow = &ctx->openFlow(port, opts, iface ? iface : "");
        {
            std::lock_guard<std::mutex> lock(ctx->flowsMu);
            ctx->flows.splice(ctx->flows.end(), node);
        }
        *out = &h;
        return 0;
    });
}

} // namespace

int npf_flow_open(npf_ctx* ctx, uint16_t port, const char* addr, const char* iface, npf_flow_handle** out)
{
    if (!ctx || !out)
        return fail(EINVAL, std::string("npf_flow_open: ") + (ctx ? "out" : "ctx") + " is NULL");
    return guarded([&] { return openFlow(ctx, port, npf::FlowOptions{.addr = addr ? addr : ""}, iface, out); });
}

int npf_flow_open_opts(npf_ctx* ctx, const struct npf_flow_opts* opts, npf_flow_handle** out)
{
    return guarded([&] {
        if (!ctx || !out)
            return fail(EINVAL, std::string("npf_flow_open_opts: ") + (ctx ? "out" : "ctx") + " is NULL");
        npf_flow_opts o;
        if (int rc = npf::capi::readOptions(opts, &o, sizeof(npf_flow_opts), "npf_flow_opts"))
            return rc;
        if (o.credits > 1)
            return fail(EINVAL, "npf_flow_opts.credits must be 0 or 1, got " + std::to_string(o.credits));
        if (o.credit_step > NPF_POST_RING_SIZE)
            return fail(EINVAL, "npf_flow_opts.credit_step must be at most " + std::to_string(NPF_POST_RING_SIZE) +
                                    ", got " + std::to_string(o.credit_step));
        if (o.credit_interval_us > 1'000'000)
            return fail(EINVAL, "npf_flow_opts.credit_interval_us must be at most 1000000, got " +
                                    std::to_string(o.credit_interval_us));
        npf::FlowOptions f{.addr = o.addr ? o.addr : ""};
        f.credits.enabled = o.credits;
        if (o.credit_step)
            f.credits.step = o.credit_step;
        if (o.credit_interval_us)
            f.credits.interval = std::chrono::microseconds(o.credit_interval_us);
        return openFlow(ctx, o.port, f, o.iface, out);
    });
}

int npf_flow_close(npf_flow_handle* f)
{
    if (!f)
        return 0; // errno untouched: nothing was done
    npf_ctx* ctx = f->ctx;
    npf::Flow& flow = *f->flow;
    std::list<npf_flow_handle> gone; // frees the handle on return, whatever closeFlow says
    {
        std::lock_guard<std::mutex> lock(ctx->flowsMu);
        gone.splice(gone.end(), ctx->flows, f->self);
    }
    return guarded([&] {
        ctx->closeFlow(flow);
        return 0;
    });
}

int npf_flow_post(npf_flow_handle* f, uint64_t offset, uint32_t len, uint64_t cookie)
{
    if (!f)
        return nullFlow("npf_flow_post");
    return guarded([&] {
        if (!f->flow->post(offset, len, cookie))
            return fail(EAGAIN, "post ring full: " + std::to_string(NPF_POST_RING_SIZE) +
                                    " buffers outstanding; poll completions first");
        return 0;
    });
}

void npf_flow_flush(npf_flow_handle* f)
{
    npf::capi::KeepErrno keep; // a flush may kick the kernel
    if (f)
        f->flow->flush();
}

// poll, wait and arm may make system calls (a wait sleeps; run to completion
// runs the fast path here): settle() gives the caller's errno back on success.

int npf_flow_poll(npf_flow_handle* f, struct npf_completion* out, unsigned max)
{
    const int saved = errno;
    if (!f || (!out && max))
        return fail(EINVAL, std::string("npf_flow_poll: ") + (f ? "out" : "flow") + " is NULL");
    return npf::capi::settle(saved, flowResult(f, f->flow->poll(std::span<npf_completion>(out, max))));
}

int npf_flow_wait(npf_flow_handle* f, struct npf_completion* out, unsigned max, int timeout_ms)
{
    const int saved = errno;
    if (!f || (!out && max))
        return fail(EINVAL, std::string("npf_flow_wait: ") + (f ? "out" : "flow") + " is NULL");
    return npf::capi::settle(
        saved, flowResult(f, f->flow->wait(std::span<npf_completion>(out, max), std::chrono::milliseconds(timeout_ms))));
}

int npf_flow_arm(npf_flow_handle* f)
{
    const int saved = errno;
    if (!f)
        return nullFlow("npf_flow_arm");
    return npf::capi::settle(saved, flowResult(f, f->flow->arm()));
}

int npf_flow_event_fd(const npf_flow_handle* f) { return f ? f->flow->eventFd() : nullFlow("npf_flow_event_fd"); }

// The accessors cannot return an errno: for a NULL flow, a value no flow has
// (npf/npf.h), with errno and words.

uint64_t npf_flow_outstanding(const npf_flow_handle* f)
{
    if (!f) {
        nullFlow("npf_flow_outstanding");
        return UINT64_MAX;
    }
    return f->flow->outstanding();
}

uint16_t npf_flow_port(const npf_flow_handle* f)
{
    if (!f) {
        nullFlow("npf_flow_port");
        return 0;
    }
    return f->flow->port();
}

uint32_t npf_flow_id(const npf_flow_handle* f)
{
    if (!f) {
        nullFlow("npf_flow_id");
        return NPF_FLOW_ID_NONE;
    }
    return f->flow->id();
}

int npf_flow_failure(const npf_flow_handle* f, char* buf, size_t len)
{
    if (!f)
        return nullFlow("npf_flow_failure");
    return guarded([&] { return npf::capi::copyMessage(f->flow->failure(), buf, len); });
}

namespace {

// Each npf_flow_counters field after xdp[] and what of FlowStats it is: every
// field once (the static_assert below fails when the struct grows without it).
struct FlowCounter {
    uint64_t npf_flow_counters::*field;
    uint64_t (*value)(const npf::FlowStats&);
};
using FS = npf::FlowStats;
constexpr FlowCounter kFlowCounters[] = {
    {&npf_flow_counters::completed_ok, [](const FS& s) { return s.completedOk; }},
    {&npf_flow_counters::completed_truncated, [](const FS& s) { return s.completedTruncated; }},
    {&npf_flow_counters::completed_bad_csum, [](const FS& s) { return s.completedBadCsum; }},
    {&npf_flow_counters::completed_lost, [](const FS& s) { return s.completedLost; }},
    {&npf_flow_counters::lost_unarrived, [](const FS& s) { return s.lostUnarrived; }},
    {&npf_flow_counters::in_flight, [](const FS& s) { return s.inFlight; }},
    {&npf_flow_counters::late, [](const FS& s) { return s.late; }},
    {&npf_flow_counters::rejected, [](const FS& s) { return s.rejected; }},
    {&npf_flow_counters::reached, [](const FS& s) { return s.reached(); }},
    {&npf_flow_counters::passed, [](const FS& s) { return s.passed(); }},
    {&npf_flow_counters::dropped_in_xdp, [](const FS& s) { return s.droppedInXdp(); }},
    {&npf_flow_counters::claimed, [](const FS& s) { return s.claimed(); }},
    {&npf_flow_counters::lost_in_xdp, [](const FS& s) { return s.lostInXdp(); }},
    {&npf_flow_counters::socket_dropped, [](const FS& s) { return s.socketDropped(); }},
    {&npf_flow_counters::credits_sent, [](const FS& s) { return s.creditsSent; }},
    {&npf_flow_counters::credits_withheld, [](const FS& s) { return s.creditsWithheld; }},
    {&npf_flow_counters::credit_waits, [](const FS& s) { return s.creditWaits; }},
    {&npf_flow_counters::credit_limit, [](const FS& s) { return s.creditLimit; }},
};
// The first version ended at socket_dropped: a caller built then passes that size.
constexpr size_t kFlowCountersV1 = offsetof(npf_flow_counters, credits_sent);
static_assert(offsetof(npf_flow_counters, completed_ok) + std::size(kFlowCounters) * sizeof(uint64_t) ==
                  sizeof(npf_flow_counters),
              "a field of npf_flow_counters that kFlowCounters does not fill");

} // namespace

int npf_flow_read_counters(const npf_flow_handle* f, struct npf_flow_counters* out)
{
    if (!f)
        return nullFlow("npf_flow_read_counters");
    return guarded([&] {
        const npf::FlowStats s = f->flow->stats();
        npf_flow_counters c{};
        std::copy(s.xdp.begin(), s.xdp.end(), c.xdp);
        for (const FlowCounter& k : kFlowCounters)
            c.*k.field = k.value(s);
        return npf::capi::writeCounters(c, out, kFlowCountersV1, "npf_flow_counters");
    });
}
