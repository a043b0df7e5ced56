// The C API's conventions, after libbpf's and liburing's (npf/npf.h, top
// comment): option structs across header versions (an older caller's
// smaller sz, a newer caller's larger one), counters into a larger or too
// small struct, errno set on failure and left alone on success, what the
// accessors return for NULL, NPF_OPTS from C (npf_opts_check.c, C11) and
// C++, and the log level and sink for C callers. The CApiConventions tests
// need no privileges; the EngineE2E ones an engine on a veth pair (root).
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ctx_in_ns.h"

extern "C" int npf_opts_check(void); // npf_opts_check.c

namespace npf::e2e {
namespace {

constexpr int kSentinel = 4242; // an errno no call sets: "left alone"

std::string last() { return npf_strerror_last(); }

::testing::AssertionResult lastSays(const std::string& words)
{
    if (last().find(words) != std::string::npos)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "npf_strerror_last() is '" << last() << "', without '" << words << "'";
}

// A failure as the header promises it: rc = -err, errno = err.
::testing::AssertionResult failedWith(long long rc, int err)
{
    if (rc == -err && errno == err)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "rc " << rc << ", errno " << errno << " (" << std::strerror(errno)
                                         << "); want -" << err << " and errno " << err << " (" << std::strerror(err)
                                         << "); " << last();
}

// The versions of npf_engine_opts callers may have been built with: the first
// C API's ended at spill_dir, the second at region_memory (its sizeof with
// the tail padding; reserve starts right after it).
constexpr size_t kEngineV1 = offsetof(npf_engine_opts, region_memory);
constexpr size_t kEngineV2 = offsetof(npf_engine_opts, reserve);
static_assert(kEngineV1 < kEngineV2 && kEngineV2 < sizeof(npf_engine_opts));

// A newer header's struct: ours and `extra` bytes the library does not know.
template <typename T, size_t extra>
struct Newer {
    T opts;
    unsigned char tail[extra];
};

TEST(CApiConventions, EngineOptsOfAnOlderCallerAreReadUpToItsSz)
{
    npf_ctx* ctx = nullptr;
    npf_engine_opts o = engineOpts("lo");
    o.sz = kEngineV1 - 1;
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_engine_open(&o, &ctx), EINVAL));
    EXPECT_TRUE(lastSays("npf_engine_opts.sz is " + std::to_string(kEngineV1 - 1)));
    o.sz = 0;
    EXPECT_TRUE(failedWith(npf_engine_open(&o, &ctx), EINVAL));

    // The first version: region_memory and reserve lie past its sz, unread.
    o = engineOpts("lo");
    o.sz = kEngineV1;
    o.region_size = 4097;
    o.region_memory = 7;
    o.reserve = 4096;
    EXPECT_TRUE(failedWith(npf_engine_open(&o, &ctx), EINVAL));
    EXPECT_TRUE(lastSays("multiple of 4096")) << "region_memory 7 past sz " << kEngineV1 << " was read";
    // The second: region_memory is read (reserve past it: CApiReserveIsReadOnlyWithinSz).
    o.sz = kEngineV2;
    EXPECT_TRUE(failedWith(npf_engine_open(&o, &ctx), EINVAL));
    EXPECT_TRUE(lastSays("region_memory 7 is none of"));
    EXPECT_EQ(ctx, nullptr);
}

TEST(CApiConventions, EngineOptsOfANewerCallerNeedAZeroTail)
{
    npf_ctx* ctx = nullptr;
    Newer<npf_engine_opts, 16> newer{};
    newer.opts = engineOpts("lo");
    newer.opts.sz = sizeof(newer);
    newer.opts.region_size = 4097;
    EXPECT_TRUE(failedWith(npf_engine_open(&newer.opts, &ctx), EINVAL));
    EXPECT_TRUE(lastSays("multiple of 4096")) << "a zero tail is accepted";
    // A newer option this library cannot honour: refused, naming its first byte.
    newer.tail[9] = 1;
    newer.tail[12] = 1;
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_engine_open(&newer.opts, &ctx), E2BIG));
    const size_t byte = offsetof(decltype(newer), tail) + 9;
    EXPECT_TRUE(lastSays("byte " + std::to_string(byte) + " of " + std::to_string(sizeof(newer))));
    EXPECT_EQ(byte, sizeof(npf_engine_opts) + 9) << "the library's struct ends where the newer tail starts";
    EXPECT_EQ(ctx, nullptr);
}

TEST(CApiConventions, ClientOptsOfEachSize)
{
    npf_ctx* ctx = nullptr;
    // Two versions: nothing smaller than the first (which ends before mode).
    Newer<npf_client_opts, 8> c{};
    c.opts.sz = offsetof(npf_client_opts, mode) - 1;
    EXPECT_TRUE(failedWith(npf_client_open(&c.opts, &ctx), EINVAL));
    EXPECT_TRUE(lastSays("npf_client_opts.sz"));
    // Newer, zero tail: read, and the connection fails on the socket.
    c.opts.sz = sizeof(c);
    c.opts.socket = "/nonexistent/npfd.sock";
    errno = kSentinel;
    const int rc = npf_client_open(&c.opts, &ctx);
    EXPECT_LT(rc, 0);
    EXPECT_NE(rc, -E2BIG);
    EXPECT_EQ(errno, -rc);
    EXPECT_TRUE(lastSays("/nonexistent/npfd.sock"));
    c.tail[0] = 0x80;
    EXPECT_TRUE(failedWith(npf_client_open(&c.opts, &ctx), E2BIG));
    EXPECT_TRUE(lastSays("byte " + std::to_string(sizeof(npf_client_opts)) + " of " + std::to_string(sizeof(c))));
    EXPECT_EQ(ctx, nullptr);
}

TEST(CApiConventions, ErrnoIsSetOnFailureAndLeftAloneOnSuccess)
{
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_flow_post(nullptr, 0, 2048, 0), EINVAL));
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_release(nullptr, 0, 1), EINVAL));
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_populate(nullptr, 0, 1), EINVAL));
    errno = kSentinel;
    npf_completion c[1];
    EXPECT_TRUE(failedWith(npf_flow_wait(nullptr, c, 1, 0), EINVAL));
    // A failure the C++ layer throws (std::invalid_argument), caught at the boundary.
    npf_engine_opts o = engineOpts("lo");
    o.xdp_mode = 7;
    npf_ctx* ctx = nullptr;
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_engine_open(&o, &ctx), EINVAL));
    EXPECT_TRUE(lastSays("xdp_mode"));
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_log_set_level(NPF_LOG_TRACE + 1), EINVAL));
    EXPECT_TRUE(lastSays("level 5"));
    EXPECT_TRUE(failedWith(npf_log_set_level(-1), EINVAL));

    // Successes and no-ops leave the caller's errno.
    errno = kSentinel;
    EXPECT_EQ(npf_log_set_level(NPF_LOG_INFO), 0);
    EXPECT_EQ(errno, kSentinel);
    EXPECT_EQ(npf_flow_close(nullptr), 0);
    EXPECT_EQ(errno, kSentinel);
    npf_flow_flush(nullptr);
    npf_ctx_close(nullptr);
    EXPECT_EQ(errno, kSentinel);
    EXPECT_EQ(npf_log_set_sink(nullptr, nullptr), 0);
    EXPECT_EQ(errno, kSentinel);
}

TEST(CApiConventions, NullAccessorsReturnWhatNoFlowOrContextHas)
{
    errno = kSentinel;
    EXPECT_EQ(npf_flow_id(nullptr), NPF_FLOW_ID_NONE);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_TRUE(lastSays("npf_flow_id: flow is NULL"));
    EXPECT_GE(uint64_t{NPF_FLOW_ID_NONE}, uint64_t{NPF_MAX_FLOWS}) << "a flow's id could be NPF_FLOW_ID_NONE";
    errno = kSentinel;
    EXPECT_EQ(npf_flow_outstanding(nullptr), UINT64_MAX);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_TRUE(lastSays("npf_flow_outstanding"));
    errno = kSentinel;
    EXPECT_EQ(npf_flow_port(nullptr), 0u);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_TRUE(lastSays("npf_flow_port"));
    errno = kSentinel;
    EXPECT_TRUE(failedWith(npf_flow_event_fd(nullptr), EINVAL));
    uint64_t size = 1;
    errno = kSentinel;
    EXPECT_EQ(npf_region(nullptr, &size), nullptr);
    EXPECT_EQ(size, 0u);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_TRUE(lastSays("npf_region: ctx is NULL"));
}

TEST(CApiConventions, NpfOptsSetsSzAndZeroesTheRest)
{
    EXPECT_EQ(npf_opts_check(), 0) << "NPF_OPTS from C (npf_opts_check.c, C11): see stderr";

    NPF_OPTS(npf_engine_opts, o, .ifname = "lo", .region_size = 4097, .region_memory = NPF_REGION_MEMORY_ANON);
    EXPECT_EQ(o.sz, sizeof(npf_engine_opts));
    EXPECT_STREQ(o.ifname, "lo");
    EXPECT_EQ(o.region_size, 4097u);
    EXPECT_EQ(o.region_memory, uint32_t{NPF_REGION_MEMORY_ANON});
    EXPECT_EQ(o.resident_budget + o.page_size + o.queues + o.xdp_mode + o.pager_threads + o.flags + o.reserve, 0u);
    EXPECT_EQ(o.spill_dir, nullptr);
    npf_ctx* ctx = nullptr;
    EXPECT_TRUE(failedWith(npf_engine_open(&o, &ctx), EINVAL));
    EXPECT_TRUE(lastSays("multiple of 4096")) << "NPF_OPTS's struct is read whole";

    NPF_OPTS(npf_client_opts, c);
    EXPECT_EQ(c.sz, sizeof(npf_client_opts));
    EXPECT_EQ(c.socket, nullptr);
    EXPECT_EQ(c.name, nullptr);
    EXPECT_EQ(c.region_size + c.resident_budget + c.page_size + c.timeout_ms, 0u);
}

// What a C sink got, under its own lock (the sink may run on any thread).
struct Lines {
    std::mutex mu;
    std::vector<std::pair<int, std::string>> got;

    static void sink(int level, const char* line, void* user)
    {
        auto* self = static_cast<Lines*>(user);
        std::lock_guard<std::mutex> lock(self->mu);
        self->got.emplace_back(level, line);
    }
    std::vector<std::pair<int, std::string>> take()
    {
        std::lock_guard<std::mutex> lock(mu);
        return std::exchange(got, {});
    }
};

// Restores stderr and the default level (NPF_LOG_INFO: no test changes it for good).
struct LogRestore {
    ~LogRestore()
    {
        npf_log_set_sink(nullptr, nullptr);
        npf_log_set_level(NPF_LOG_INFO);
    }
};

std::string show(const std::vector<std::pair<int, std::string>>& lines)
{
    std::string s;
    for (const auto& [level, line] : lines)
        s += "\n  [" + std::to_string(level) + "] " + line;
    return s;
}

// The engine's own lines reach a C sink at the level set: its INFO lines
// (the flow opened and closed) only once the level is NPF_LOG_INFO, one
// line each, without newline or prefix; after npf_log_set_sink(NULL) none.
TEST_F(EngineE2E, CApiLogSinkGetsTheEnginesLinesAtItsLevel)
{
    Rig rig;
    const std::string ifname = rig.rxIf();
    LogRestore restore;
    Lines lines;
    ASSERT_EQ(npf_log_set_level(NPF_LOG_WARN), 0);
    ASSERT_EQ(npf_log_set_sink(&Lines::sink, &lines), 0);
    CtxInNs ctx(rig, engineOpts(ifname.c_str()));
    ASSERT_EQ(ctx.rc(), 0) << last();
    npf_flow_handle* f = nullptr;
    ASSERT_EQ(npf_flow_open(ctx.get(), 7440, nullptr, nullptr, &f), 0) << last();
    ASSERT_EQ(npf_flow_close(f), 0) << last();
    for (const auto& [level, line] : lines.take())
        EXPECT_LE(level, NPF_LOG_WARN) << "a line above NPF_LOG_WARN passed: " << line;

    ASSERT_EQ(npf_log_set_level(NPF_LOG_INFO), 0);
    ASSERT_EQ(npf_flow_open(ctx.get(), 7440, nullptr, nullptr, &f), 0) << last();
    const uint32_t id = npf_flow_id(f);
    ASSERT_EQ(npf_flow_close(f), 0) << last();
    const auto got = lines.take();
    const std::string opened = "flow " + std::to_string(id) + ": ";
    size_t flowLines = 0;
    for (const auto& [level, line] : got) {
        EXPECT_LE(level, NPF_LOG_INFO) << line;
        EXPECT_EQ(line.find('\n'), std::string::npos) << line;
        EXPECT_NE(line.rfind("npf: ", 0), 0u) << "the stderr prefix reached the sink: " << line;
        if (line.rfind(opened, 0) == 0 && line.find(ifname) != std::string::npos) {
            EXPECT_EQ(level, NPF_LOG_INFO) << line;
            flowLines++;
        }
    }
    EXPECT_EQ(flowLines, 2u) << "want the flow's opened and closed lines (INFO, naming " << ifname
                             << "); the sink got:" << show(got);

    ASSERT_EQ(npf_log_set_sink(nullptr, nullptr), 0);
    ASSERT_EQ(npf_flow_open(ctx.get(), 7440, nullptr, nullptr, &f), 0) << last();
    ASSERT_EQ(npf_flow_close(f), 0) << last();
    EXPECT_EQ(lines.take().size(), 0u) << "the sink was called after npf_log_set_sink(NULL)";
}

// reserve (the third version's field) reaches the engine, which refuses it
// with a memfd; a second-version caller's sz ends before it, so whatever its
// bytes hold is not read.
TEST_F(EngineE2E, CApiReserveIsReadOnlyWithinSz)
{
    Rig rig;
    const std::string ifname = rig.rxIf();
    npf_engine_opts o = engineOpts(ifname.c_str());
    o.region_memory = NPF_REGION_MEMORY_MEMFD;
    o.reserve = 1ull << 20;
    {
        errno = kSentinel;
        CtxInNs ctx(rig, o);
        EXPECT_TRUE(failedWith(ctx.rc(), EINVAL));
        EXPECT_TRUE(lastSays("reserve"));
    }
    o.sz = kEngineV2;
    {
        errno = kSentinel;
        CtxInNs ctx(rig, o);
        EXPECT_EQ(ctx.rc(), 0) << "reserve past sz " << kEngineV2 << " was read: " << last();
        EXPECT_EQ(errno, kSentinel) << "a successful npf_engine_open changed errno";
    }
    o = engineOpts(ifname.c_str());
    o.region_memory = NPF_REGION_MEMORY_ANON;
    o.reserve = 1ull << 20;
    CtxInNs ctx(rig, o);
    EXPECT_EQ(ctx.rc(), 0) << last();
}

// Counters into a larger struct (a newer header): what the library knows,
// then zeros, and the caller's sz kept; into one smaller than the first
// version: -EINVAL and nothing written. Every call on the way succeeds with
// errno left as the caller set it, though libnpf makes system calls.
TEST_F(EngineE2E, CApiCountersAndErrnoOnAWorkingFlow)
{
    Rig rig;
    const std::string ifname = rig.rxIf();
    errno = kSentinel;
    CtxInNs ctx(rig, engineOpts(ifname.c_str()));
    ASSERT_EQ(ctx.rc(), 0) << last();
    EXPECT_EQ(errno, kSentinel) << "npf_engine_open";
    npf_flow_handle* f = nullptr;
    errno = kSentinel;
    ASSERT_EQ(npf_flow_open(ctx.get(), 7441, nullptr, nullptr, &f), 0) << last();
    EXPECT_EQ(errno, kSentinel) << "npf_flow_open";
    EXPECT_LT(npf_flow_id(f), uint32_t{NPF_MAX_FLOWS});
    EXPECT_EQ(npf_flow_port(f), 7441);
    EXPECT_EQ(errno, kSentinel) << "npf_flow_id, npf_flow_port";

    EXPECT_EQ(npf_flow_post(f, 0, 2048, 1), 0) << last();
    npf_flow_flush(f);
    EXPECT_EQ(npf_flow_outstanding(f), 1u);
    EXPECT_EQ(errno, kSentinel) << "npf_flow_post, npf_flow_flush, npf_flow_outstanding";
    npf_completion c[4];
    EXPECT_EQ(npf_flow_poll(f, c, 4), 0) << last();
    EXPECT_EQ(npf_flow_wait(f, c, 4, 10), 0) << last();
    EXPECT_EQ(errno, kSentinel) << "npf_flow_poll, npf_flow_wait (a timeout)";
    EXPECT_EQ(npf_flow_arm(f), 0) << last();
    EXPECT_GE(npf_flow_event_fd(f), 0);
    EXPECT_EQ(errno, kSentinel) << "npf_flow_arm, npf_flow_event_fd";
    EXPECT_EQ(npf_populate(ctx.get(), 0, 4096), 1) << last();
    EXPECT_EQ(npf_release(ctx.get(), 0, 4096), 0) << last();
    char why[64];
    EXPECT_EQ(npf_ctx_failure(ctx.get(), why, sizeof(why)), 0);
    EXPECT_EQ(npf_flow_failure(f, why, sizeof(why)), 0);
    EXPECT_EQ(errno, kSentinel) << "npf_populate, npf_release, npf_*_failure";

    Newer<npf_ctx_counters, 24> cc;
    std::memset(&cc, 0xa5, sizeof(cc));
    cc.opts.sz = sizeof(cc);
    ASSERT_EQ(npf_ctx_read_counters(ctx.get(), &cc.opts), 0) << last();
    EXPECT_EQ(cc.opts.sz, sizeof(cc)) << "the caller's sz was changed";
    EXPECT_GT(cc.opts.pinned_bytes, 0u) << "the UMEM";
    for (size_t i = 0; i < sizeof(cc.tail); i++)
        EXPECT_EQ(cc.tail[i], 0) << "byte " << offsetof(decltype(cc), tail) + i << " past the library's struct";
    Newer<npf_flow_counters, 8> fc;
    std::memset(&fc, 0xa5, sizeof(fc));
    fc.opts.sz = sizeof(fc);
    ASSERT_EQ(npf_flow_read_counters(f, &fc.opts), 0) << last();
    EXPECT_EQ(fc.opts.sz, sizeof(fc));
    EXPECT_EQ(fc.opts.reached, 0u);
    EXPECT_EQ(fc.opts.xdp[NPF_FLOW_COUNTERS_XDP - 1], 0u) << "an outcome slot no enum names";
    for (size_t i = 0; i < sizeof(fc.tail); i++)
        EXPECT_EQ(fc.tail[i], 0) << "byte " << offsetof(decltype(fc), tail) + i << " past the library's struct";
    EXPECT_EQ(errno, kSentinel) << "npf_*_read_counters";

    // Smaller than the first version (today's struct): refused, nothing written.
    Newer<npf_ctx_counters, 1> small;
    std::memset(&small, 0xa5, sizeof(small));
    small.opts.sz = sizeof(npf_ctx_counters) - sizeof(uint64_t);
    EXPECT_TRUE(failedWith(npf_ctx_read_counters(ctx.get(), &small.opts), EINVAL));
    EXPECT_TRUE(lastSays("npf_ctx_counters.sz"));
    EXPECT_EQ(small.opts.completed_ok, 0xa5a5a5a5a5a5a5a5u) << "written though refused";
    Newer<npf_flow_counters, 1> fsmall;
    std::memset(&fsmall, 0xa5, sizeof(fsmall));
    fsmall.opts.sz = offsetof(npf_flow_counters, socket_dropped);
    EXPECT_TRUE(failedWith(npf_flow_read_counters(f, &fsmall.opts), EINVAL));
    EXPECT_EQ(fsmall.opts.reached, 0xa5a5a5a5a5a5a5a5u) << "written though refused";

    errno = kSentinel;
    EXPECT_EQ(npf_flow_close(f), 0) << last();
    ctx.close();
    EXPECT_EQ(errno, kSentinel) << "npf_flow_close, npf_ctx_close";
}

} // namespace
} // namespace npf::e2e
