// npf-recv: receive UDP datagrams on a port into pageable memory through npf
// and write each payload, in completion order, to a file or stdout. Think
// `nc -lu`, but through npf. On every exit (count, idle, signal, write
// error) a summary goes to stderr that accounts for every datagram of the
// flow that reached XDP: written, or why not (Flow::stats, the same in
// process and through npfd). Built on libnpf's public API (include/npf)
// alone, as any application would be.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "npf/abi.h"
#include "npf/client.h"
#include "npf/counters.h"
#include "npf/engine.h"
#include "npf/error.h"
#include "npf/interface.h"
#include "npf/log.h"
#include "npf/page_rates.h"
#include "npf/version.h"
#include "npf_exit_codes.h"
#include "sizes.h"

namespace {

std::atomic<bool> g_stop{false};

// The output file descriptor, closed on every way out.
struct OutFd {
    int fd;
    ~OutFd()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

void onSignal(int) { g_stop.store(true); }

bool writeAll(int fd, const uint8_t* p, size_t n)
{
    while (n) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

struct Options {
    std::string ifname, addr, output = "-", mode = "native", spillDir = "/var/tmp";
    std::string region = "64M", budget = "0", bufSize = "2048", pageSize = "4K"; // sizes: see parseSizes
    std::string regionMemory = "auto", reserve = "auto";
    uint16_t port = 0;
    uint32_t queues = 0, prefetch = 256, pagers = 1;
    uint64_t count = 0;
    int readyFd = -1; // --ready-fd: "ready\n" once every buffer is posted
    bool connect = false;  // --connect: through npfd
    std::string socket;    // its socket ("" = the default)
    std::string clientMode = "auto"; // --client-mode: who runs the data path then
    double idle = 0, reorderMs = 1.0;
    bool cold = false, quiet = false, json = false, noUdpCsum = false, runToCompletion = false, busyPoll = false;
    bool credits = false; // --credits: grant them to the sender (npf::CreditConfig)
    uint32_t creditStep = 64, creditIntervalUs = 100;
    int verbose = 0;
};

npf::FlowOptions flowOptions(const Options& o)
{
    npf::FlowOptions f{.addr = o.addr};
    f.credits.enabled = o.credits;
    f.credits.step = o.creditStep;
    f.credits.interval = std::chrono::microseconds(o.creditIntervalUs);
    return f;
}

// The size options, in bytes.
struct Sizes {
    uint64_t region = 0; // whole pages
    uint64_t budget = 0;
    uint64_t reserve = 0; // whole pages, at most the region
    uint32_t buf = 0;
    uint64_t page = NPF_PAGE_SIZE;
};

// --reserve in bytes. "auto": a region of 2 MiB pages in this process's
// own private memory reserves what it may hold resident (its budget, else
// itself; at most kAutoReserveMax): a fresh huge page can take milliseconds
// to compact and fault in on a VM, while its ~1,500 datagrams arrive in a
// few hundred microseconds (docs/architecture.md, "Where a region's pages
// come from"). 4 KiB pages, npfd's regions and memfds reserve nothing.
uint64_t reserveBytes(const Options& o, const Sizes& s)
{
    constexpr uint64_t kAutoReserveMax = 1ull << 30;
    if (o.reserve != "auto")
        return recv::parseSize("--reserve", o.reserve);
    if (s.page == NPF_PAGE_SIZE || o.connect || o.regionMemory == "memfd")
        return 0;
    return std::min(s.budget ? s.budget : s.region, kAutoReserveMax);
}

// Throws std::invalid_argument naming the option.
Sizes parseSizes(const Options& o)
{
    using recv::parseSize;
    constexpr uint64_t kMaxRegion = NPF_MAX_REGION_PAGES * NPF_PAGE_SIZE;
    Sizes s;
    s.region = parseSize("--region", o.region);
    if (s.region == 0 || s.region > kMaxRegion)
        throw std::invalid_argument("--region: '" + o.region + "' is out of range (1 .. 1T)");
    s.page = o.pageSize == "2M" ? 2ull << 20 : NPF_PAGE_SIZE;
    s.region = (s.region + s.page - 1) / s.page * s.page;
    if (s.region > kMaxRegion)
        throw std::invalid_argument("--region: '" + o.region + "' rounded up to whole pages exceeds 1T");
    s.budget = parseSize("--budget", o.budget);
    s.reserve = std::min((reserveBytes(o, s) + s.page - 1) / s.page * s.page, s.region);
    const uint64_t maxBuf = std::min<uint64_t>(s.region, UINT32_MAX);
    const uint64_t buf = parseSize("--buf-size", o.bufSize);
    if (buf == 0 || buf > maxBuf)
        throw std::invalid_argument("--buf-size: '" + o.bufSize + "' is out of range (1 .. " +
                                    std::to_string(maxBuf) + ", the region size)");
    s.buf = static_cast<uint32_t>(buf);
    return s;
}

// Engine::openFlow checks the address only once the program is attached.
void checkAddr(const Options& o)
{
    try {
        npf::checkFlowAddress(o.addr);
    } catch (const std::system_error& e) {
        throw std::invalid_argument(std::string("--addr: ") + e.what());
    }
}

// Completions npf-recv polled.
struct Tally {
    uint64_t ok = 0, truncated = 0, lost = 0, badCsum = 0, bytes = 0;
    uint64_t writeFailed = 0; // OK or TRUNCATED, but the write to the output failed
    uint64_t firstNs = 0, lastNs = 0; // steady clock: the first and the last poll that got completions
    uint64_t completions() const { return ok + truncated + lost + badCsum + writeFailed; }
};

// The interface's drops before XDP (any traffic, no flow's): read when the
// flow opens and at exit, in process only (an npfd client's interface is npfd's).
struct Outside {
    npf::InterfaceRxDrops link;
    std::string error; // why it could not be read ("" = read)
};
Outside readOutside(const npf::Engine&, const std::string& ifname)
{
    try {
        return {npf::interfaceRxDrops(ifname), ""};
    } catch (const std::exception& e) {
        return {{}, e.what()};
    }
}
Outside readOutside(const npf::Client&, const std::string&)
{
    return {{}, "the interface is npfd's (npfctl stats IFACE)"};
}

std::string statsJson(const npf::Engine& eng) { return eng.statsJson(); }
// The shape of Engine::statsJson() without an interface or a time: the
// client's own numbers.
std::string statsJson(const npf::Client& cli)
{
    nlohmann::ordered_json j = {{"interface", ""}, {"pid", ::getpid()}, {"time_ns", 0}};
    j.update(nlohmann::ordered_json::parse(npf::toJson(cli.stats())));
    j["route"] = cli.route();
    return j.dump();
}

// Writes a completed buffer. An npfd client's region is registered for
// user-mode faults only: a page npfd evicted since the completion makes
// write(2) fail with EFAULT; touching it here brings it back, then retry.
bool writeBuffer(int fd, const uint8_t* p, size_t n, bool touch)
{
    for (int attempt = 0;; attempt++) {
        if (writeAll(fd, p, n))
            return true;
        if (!touch || errno != EFAULT || attempt == 8)
            return false;
        for (size_t off = 0; off < n; off += NPF_PAGE_SIZE)
            (void)*static_cast<const volatile uint8_t*>(p + off);
        (void)*static_cast<const volatile uint8_t*>(p + n - 1);
    }
}

// The exit summary's figures. The flow's own accounting (Flow::stats: XDP's
// outcomes for this flow, its completions, what is in flight) and what
// npf-recv did with the completions it polled; every datagram of the flow
// that reached XDP is in exactly one term of notWritten() or written().
struct Summary {
    Tally t;
    npf::FlowStats f;
    std::string flowError; // why f could not be read ("" = read)
    npf::EngineStats s;
    Outside outside;       // exit - start
    uint64_t regionSize = 0;
    uint64_t budget = 0;   // the region's resident budget, bytes (0: unlimited); through npfd, what it granted
    uint64_t reserve = 0;  // bytes reserved at start (--reserve)
    // The bound of the moment (npf/page_rates.h): the page rates measured at
    // start, and what they allowed of what reached XDP (0: unknown).
    npf::PageRates rates;
    double bound = 0;
    // Where the region's pages came from: its route (Region::route) and its
    // page pool's counters, from the engine's stats JSON ("" / 0: not there).
    std::string route;
    bool cold = false; // --cold: the bound counts page installs
    bool credits = false; // --credits: the summary has a credits line
    uint64_t poolTaken = 0, poolFresh = 0, poolRefills = 0, poolReturned = 0, poolFreed = 0, reserveFreed = 0;

    uint64_t written() const { return t.ok + t.truncated; }
    // Completed, but npf-recv stopped (--count, a signal) before polling them.
    uint64_t notPolled() const { return f.completed() > t.completions() ? f.completed() - t.completions() : 0; }
    uint64_t notWritten() const
    {
        return t.lost + t.badCsum + t.writeFailed + f.droppedInXdp() + f.passed() + f.inFlight + notPolled();
    }
    uint64_t lostByService() const { return f.completedLost - std::min(f.completedLost, f.lostUnarrived); }
};

// Engine counters on the summary's "engine" line, by their kEngineCounters names.
using E = npf::EngineStats;
constexpr std::initializer_list<uint64_t E::*> kEngineLine = {
    &E::fastPath, &E::faultPath, &E::deferred, &E::cpuFaults, &E::packetFaults, &E::prefetched, &E::evicted};

void printText(const Summary& m)
{
    using ull = unsigned long long;
    const Tally& t = m.t;
    const npf::FlowStats& f = m.f;
    const npf::EngineStats& s = m.s;
    if (!m.flowError.empty()) {
        fprintf(stderr, "npf-recv: %llu datagrams, %llu bytes written; the flow's accounting is unavailable: %s\n",
                ull(m.written()), ull(t.bytes), m.flowError.c_str());
    } else {
        fprintf(stderr,
                "npf-recv: %llu datagrams of the flow reached XDP: %llu written (%llu bytes); not written: %llu lost, "
                "%llu bad checksum, %llu dropped in XDP, %llu passed to the kernel, %llu in flight, %llu not polled, "
                "%llu failed to write\n",
                ull(f.reached()), ull(m.written()), ull(t.bytes), ull(t.lost), ull(t.badCsum), ull(f.droppedInXdp()),
                ull(f.passed()), ull(f.inFlight), ull(m.notPolled()), ull(t.writeFailed));
        if (m.written() + m.notWritten() != f.reached())
            fprintf(stderr, "npf-recv: warning: the terms add up to %llu, not %llu: please report this\n",
                    ull(m.written() + m.notWritten()), ull(f.reached()));
    }
    fprintf(stderr, "  polled   ok=%llu truncated=%llu lost=%llu bad_csum=%llu write_failed=%llu\n", ull(t.ok),
            ull(t.truncated), ull(t.lost), ull(t.badCsum), ull(t.writeFailed));
    if (m.flowError.empty()) {
        fprintf(stderr,
                "  flow     reached=%llu passed=%llu dropped_in_xdp=%llu claimed=%llu completed_ok=%llu "
                "completed_truncated=%llu completed_bad_csum=%llu completed_lost=%llu in_flight=%llu\n",
                ull(f.reached()), ull(f.passed()), ull(f.droppedInXdp()), ull(f.claimed()), ull(f.completedOk),
                ull(f.completedTruncated), ull(f.completedBadCsum), ull(f.completedLost), ull(f.inFlight));
        const std::string xdp = npf::formatXdpOutcomes(f);
        fprintf(stderr, "  xdp      %s  # this flow's datagrams by outcome (the non-zero ones)\n",
                xdp.empty() ? "none" : xdp.c_str());
        fprintf(stderr,
                "  lost     unarrived=%llu drop_bad_desc=%llu redir_fail=%llu socket_dropped=%llu by_service=%llu "
                "late=%llu rejected=%llu  # why seqs completed LOST\n",
                ull(f.lostUnarrived), ull(f.xdpCount(NPF_STAT_DROP_BAD_DESC)), ull(f.xdpCount(NPF_STAT_REDIR_FAIL)),
                ull(f.socketDropped()), ull(m.lostByService()), ull(f.late), ull(f.rejected));
        if (m.credits)
            fprintf(stderr,
                    "  credits  sent=%llu withheld=%llu waits=%llu limit=%llu drop_rnr=%llu  # grants to the sender "
                    "(waits: it had used up the last one)\n",
                    ull(f.creditsSent), ull(f.creditsWithheld), ull(f.creditWaits), ull(f.creditLimit),
                    ull(f.xdpCount(NPF_STAT_DROP_RNR)));
    }
    if (m.outside.error.empty())
        fprintf(stderr, "  outside  if_rx_dropped=%llu if_rx_missed=%llu  # the interface before XDP: any traffic, "
                        "no flow's\n",
                ull(m.outside.link.dropped), ull(m.outside.link.missed));
    else
        fprintf(stderr, "  outside  unavailable: %s\n", m.outside.error.c_str());
    fprintf(stderr, "  engine   %s\n", npf::formatCounters(s, kEngineLine).c_str());
    char budget[32] = "unlimited";
    if (m.budget)
        std::snprintf(budget, sizeof budget, "%.1f", double(m.budget) / (1 << 20));
    fprintf(stderr, "  memory   resident_mib=%.1f budget_mib=%s region_mib=%llu reserve_mib=%llu pinned_mib=%.1f\n",
            double(s.residentPages) * NPF_PAGE_SIZE / (1 << 20), budget, ull(m.regionSize >> 20), ull(m.reserve >> 20),
            double(s.pinnedBytes) / (1 << 20));
    if (m.bound > 0)
        fprintf(stderr,
                "  bound    datagrams=%.0f written_over_bound=%.2f  # what the page rates of the moment allowed of "
                "what reached XDP: %s\n",
                m.bound, double(m.written()) / m.bound,
                m.cold ? m.rates.line().c_str() : "a warm region installs no pages, every datagram counts");
    else
        fprintf(stderr, "  bound    unknown  # %s\n",
                !m.rates.error.empty() ? m.rates.error.c_str()
                                       : "no page rates, or every completion came in one poll");
    fprintf(stderr,
            "  pages    route=%s pool_taken=%llu pool_fresh=%llu pool_refills=%llu pool_returned=%llu "
            "pool_freed=%llu reserve_freed=%llu  # where the region's pages came from%s\n",
            m.route.empty() ? "unknown" : m.route.c_str(), ull(m.poolTaken), ull(m.poolFresh), ull(m.poolRefills),
            ull(m.poolReturned), ull(m.poolFreed), ull(m.reserveFreed),
            m.poolFresh ? ": fresh pages were allocated while receiving (the machine's fresh-page rate)" : "");
    fprintf(stderr,
            "  latency  fault_n=%llu fault_p50_us=%.1f fault_p99_us=%.1f fault_p999_us=%.1f fast_n=%llu "
            "fast_p50_us=%.1f fast_p99_us=%.1f  # steer -> placed\n",
            ull(s.faultTotal.count), double(s.faultTotal.p50) / 1e3, double(s.faultTotal.p99) / 1e3,
            double(s.faultTotal.p999) / 1e3, ull(s.fastTotal.count), double(s.fastTotal.p50) / 1e3,
            double(s.fastTotal.p99) / 1e3);
}

void printJson(const Summary& m, const std::string& engineJson)
{
    const Tally& t = m.t;
    const npf::FlowStats& f = m.f;
    nlohmann::ordered_json j;
    j["datagrams"] = m.written();
    j["bytes"] = t.bytes;
    j["polled"] = {{"ok", t.ok},
                   {"truncated", t.truncated},
                   {"lost", t.lost},
                   {"bad_csum", t.badCsum},
                   {"write_failed", t.writeFailed}};
    if (m.flowError.empty()) {
        j["reached"] = f.reached();
        j["not_written"] = {{"lost", t.lost},
                            {"bad_csum", t.badCsum},
                            {"write_failed", t.writeFailed},
                            {"dropped_in_xdp", f.droppedInXdp()},
                            {"passed", f.passed()},
                            {"in_flight", f.inFlight},
                            {"not_polled", m.notPolled()}};
        j["flow"] = nlohmann::ordered_json::parse(npf::toJson(f));
        j["flow"]["lost_by_service"] = m.lostByService();
    } else {
        j["reached"] = nullptr;
        j["not_written"] = nullptr;
        j["flow"] = nullptr;
        j["problem"] = m.flowError;
    }
    if (m.outside.error.empty())
        j["outside"] = {{"if_rx_dropped", m.outside.link.dropped}, {"if_rx_missed", m.outside.link.missed}};
    else
        j["outside"] = nullptr;
    j["budget_bytes"] = m.budget; // 0: unlimited
    j["reserve_bytes"] = m.reserve;
    j["bound"] = {{"datagrams", m.bound}, // 0: unknown
                  {"written_over_bound", m.bound > 0 ? double(m.written()) / m.bound : 0.0},
                  {"page_rates", nlohmann::ordered_json::parse(npf::toJson(m.rates))}};
    j["engine"] = nlohmann::ordered_json::parse(engineJson);
    fprintf(stderr, "%s\n", j.dump().c_str());
}

// The flow's buffers: slot i of the region is [i * buf, (i + 1) * buf),
// posted round robin.
class Poster {
public:
    Poster(npf::Flow& flow, uint64_t regionSize, uint32_t buf)
        : flow_(flow), slots_(regionSize / buf), buf_(buf), depth_(std::min<uint64_t>(slots_, NPF_POST_RING_SIZE))
    {
    }
    // Buffers kept posted: the region's slots, at most a post ring's worth.
    uint64_t depth() const { return depth_; }
    void postNext()
    {
        flow_.post((next_ % slots_) * buf_, buf_);
        next_++;
    }
    // Posts depth() buffers and makes them XDP's.
    void postAll()
    {
        for (uint64_t i = 0; i < depth_; i++)
            postNext();
        flow_.flush();
    }

private:
    npf::Flow& flow_;
    const uint64_t slots_;
    const uint32_t buf_;
    const uint64_t depth_;
    uint64_t next_ = 0; // next slot to post
};

// The readiness event for scripts and tests (--ready-fd): datagrams sent
// from now on find a buffer.
void signalReady(int fd)
{
    static constexpr char kReady[] = "ready\n";
    if (!writeAll(fd, reinterpret_cast<const uint8_t*>(kReady), sizeof(kReady) - 1))
        NPF_WARN("npf-recv: --ready-fd %d: %s", fd, strerror(errno));
    ::close(fd);
}

// How the receive loop ended, besides a stop signal, --count or --idle.
enum class Ending { Done, WriteFailed, SourceGone };

// Tallies one completion and writes its payload from `skip` bytes on (the
// first `skip` are written already); false if the write failed.
bool complete(const npf_completion& c, const uint8_t* region, const Options& o, int fd, bool touch, Tally& t,
              uint32_t skip = 0)
{
    if (c.status == NPF_CS_LOST) {
        t.lost++;
        NPF_WARN_RL("npf-recv: seq %llu lost", static_cast<unsigned long long>(c.seq));
        return true;
    }
    if (c.status == NPF_CS_BAD_CSUM) {
        t.badCsum++;
        NPF_WARN_RL("npf-recv: seq %llu has a wrong UDP checksum: not written", static_cast<unsigned long long>(c.seq));
        return true;
    }
    if (skip == c.len || writeBuffer(fd, region + c.offset + skip, c.len - skip, touch)) {
        (c.status == NPF_CS_TRUNCATED ? t.truncated : t.ok)++;
        t.bytes += c.len;
        return true;
    }
    t.writeFailed++;
    NPF_ERR("npf-recv: writing %s: %s", o.output.c_str(), strerror(errno));
    return false;
}

bool carriesPayload(const npf_completion& c) { return c.status == NPF_CS_OK || c.status == NPF_CS_TRUNCATED; }

// Writes the payloads of c[0, n) in order with one writev(2) (a system call
// per datagram was most of npf-recv's CPU under a burst: on a VM each is an
// exit to the host), then tallies each completion; what that call did not
// write goes one completion at a time (complete()). Returns the index of the
// first completion whose write failed, or n.
size_t completeBatch(const npf_completion* c, size_t n, std::vector<iovec>& iov, const uint8_t* region,
                     const Options& o, int fd, bool touch, Tally& t)
{
    iov.clear();
    for (size_t i = 0; i < n; i++)
        if (carriesPayload(c[i]))
            iov.push_back({const_cast<uint8_t*>(region + c[i].offset), c[i].len});
    ssize_t w = 0;
    if (!iov.empty())
        do
            w = ::writev(fd, iov.data(), static_cast<int>(std::min<size_t>(iov.size(), IOV_MAX)));
        while (w < 0 && errno == EINTR);
    uint64_t done = w > 0 ? static_cast<uint64_t>(w) : 0; // bytes the call wrote, in order
    for (size_t i = 0; i < n; i++) {
        const uint32_t skip = carriesPayload(c[i]) ? static_cast<uint32_t>(std::min<uint64_t>(done, c[i].len)) : 0;
        done -= skip;
        if (!complete(c[i], region, o, fd, touch, t, skip))
            return i;
    }
    return n;
}

// Polls completions, writes them in order and reposts each buffer, until a
// stop signal, --count, --idle, a write error or the source's failure.
Ending pollLoop(const Options& o, npf::Flow& flow, const uint8_t* region, Poster& poster, const OutFd& out,
                bool client, Tally& t)
{
    auto lastData = std::chrono::steady_clock::now();
    std::vector<npf_completion> batch(256);
    std::vector<iovec> iov;
    iov.reserve(batch.size());
    while (!g_stop.load() && (o.count == 0 || t.completions() < o.count)) {
        const int r = flow.wait(batch, std::chrono::milliseconds(50));
        auto now = std::chrono::steady_clock::now();
        if (r < 0) {
            NPF_ERR("npf-recv: %s; stopping", flow.failure().c_str());
            return Ending::SourceGone;
        }
        const size_t n = static_cast<size_t>(r);
        if (n == 0) {
            if (o.idle > 0 && t.completions() > 0 && std::chrono::duration<double>(now - lastData).count() >= o.idle)
                return Ending::Done;
            continue;
        }
        lastData = now;
        t.lastNs = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
        if (!t.firstNs)
            t.firstNs = t.lastNs;
        const size_t ok = completeBatch(batch.data(), n, iov, region, o, out.fd, client, t);
        for (size_t i = 0; i < std::min(ok + 1, n); i++)
            poster.postNext();
        if (ok < n)
            return Ending::WriteFailed;
    }
    return Ending::Done;
}

// The route and the pool's counters of the engine's stats JSON, where it has them.
void readPages(const nlohmann::json& j, Summary& m)
{
    if (!j.is_object())
        return;
    if (j.contains("route") && j["route"].is_string())
        m.route = j["route"].get<std::string>();
    if (!j.contains("region") || !j["region"].is_object())
        return;
    const nlohmann::json& r = j["region"];
    auto at = [&](const char* k) { return r.contains(k) && r[k].is_number_unsigned() ? r[k].get<uint64_t>() : 0; };
    m.poolTaken = at("pool_installs");
    m.poolFresh = at("pool_empty");
    m.poolRefills = at("pool_refills");
    m.poolReturned = at("pool_returns");
    m.poolFreed = at("pool_full");
    m.reserveFreed = at("reserve_freed");
}

// The bound of the moment: what of the datagrams that reached XDP a receiver
// could have written if installing a cold region's pages (at the page rates
// measured at start) were its only cost, over the time they arrived in (the
// first to the last poll that got completions). 0: unknown (no rates, one
// poll).
double boundOf(const Options& o, const Sizes& sz, const Summary& m)
{
    const uint64_t reached = m.f.reached(), perPage = std::max<uint64_t>(1, sz.page / sz.buf);
    const uint64_t pages = o.cold ? std::min(m.regionSize / sz.page, (reached + perPage - 1) / perPage) : 0;
    const double seconds = m.t.lastNs > m.t.firstNs ? double(m.t.lastNs - m.t.firstNs) * 1e-9 : 0;
    const double perInstall = npf::installSeconds(m.rates, sz.page, sz.reserve > 0);
    if (pages && perInstall <= 0 && !(sz.reserve && sz.page > NPF_PAGE_SIZE))
        return 0;
    return npf::boundOfTheMoment(reached, seconds, pages, perInstall, uint32_t(perPage));
}

// The exit summary: the tally, the flow's accounting, the engine's counters
// and the interface's drops since `start`, as text or JSON on stderr.
template <typename Source>
void summarize(const Options& o, const Sizes& sz, Source& eng, const npf::Flow& flow, const Outside& start,
               const Tally& t, uint64_t budget, const npf::PageRates& rates)
{
    Summary m; // member by member: GCC 12 takes a designated initializer of it for maybe-uninitialized
    m.t = t;
    m.regionSize = eng.regionSize();
    m.budget = budget;
    m.reserve = sz.reserve;
    m.rates = rates;
    m.cold = o.cold;
    m.credits = o.credits;
    try {
        m.f = flow.stats();
        m.bound = boundOf(o, sz, m);
    } catch (const std::exception& e) {
        m.flowError = e.what(); // npfd gone
    }
    std::string engineJson = "{}";
    try {
        m.s = eng.stats();
        engineJson = statsJson(eng);
        readPages(nlohmann::json::parse(engineJson, nullptr, false), m);
    } catch (const std::exception& e) {
        NPF_WARN("npf-recv: stats: %s", e.what()); // npfd gone
    }
    m.outside = start;
    if (start.error.empty()) {
        const Outside end = readOutside(eng, o.ifname);
        m.outside = end.error.empty() ? Outside{{end.link.dropped - start.link.dropped,
                                                 end.link.missed - start.link.missed}, ""}
                                      : end;
    }
    if (o.json)
        printJson(m, engineJson);
    else
        printText(m);
}

// Receives through an in-process npf::Engine or npfd (npf::Client): the same
// flow, posting and polling either way.
template <typename Source>
int receive(const Options& o, const Sizes& sz, Source& eng, npf::Flow& flow, const OutFd& out)
{
    constexpr bool client = std::is_same_v<Source, npf::Client>;
    const Outside start = readOutside(eng, o.ifname);
    const uint64_t regionSize = eng.regionSize();
    uint64_t budget = sz.budget; // 0: unlimited
    if constexpr (client)
        budget = eng.residentBudget(); // what npfd granted
    // The machine's page rates now, for the summary's bound (16 MiB of probes,
    // a few ms): only a cold region installs pages as datagrams come.
    const npf::PageRates rates = o.quiet || !o.cold ? npf::PageRates{} : npf::measurePageRates(16ull << 20, -1);
    Poster poster(flow, regionSize, sz.buf);
    if (!o.cold)
        eng.populate(0, std::min<uint64_t>(regionSize, poster.depth() * sz.buf));
    poster.postAll(); // every buffer is XDP's before the ready line below
    NPF_INFO("npf-recv: %s port %u: %llu buffers of %u bytes posted in a %llu MiB region (%s), budget %s%s",
             o.ifname.c_str(), o.port, static_cast<unsigned long long>(poster.depth()), sz.buf,
             static_cast<unsigned long long>(regionSize >> 20), o.cold ? "cold" : "warm",
             budget ? (std::to_string(budget >> 10) + " KiB").c_str() : "unlimited",
             client ? (sz.budget ? " (through npfd)" : " (through npfd: its default for the rule)") : "");
    if (o.readyFd >= 0)
        signalReady(o.readyFd);

    Tally t;
    const Ending ending = pollLoop(o, flow, eng.region(), poster, out, client, t);
    if (!o.quiet)
        summarize(o, sz, eng, flow, start, t, budget, rates);
    if (ending == Ending::SourceGone)
        return npf::exit_codes::kExitNoDevice;
    return ending == Ending::WriteFailed ? npf::exit_codes::kExitFailure : npf::exit_codes::kExitOk;
}

// What only a data path of this process's own takes: a usage error when
// npfd runs it (brokered mode).
void refuseBrokered(const Options& o, const Sizes& sz)
{
    if (sz.reserve)
        throw std::invalid_argument("--reserve: npfd runs this client's data path (brokered mode): the region's "
                                    "pages are the client's memfd");
    if (o.busyPoll)
        throw std::invalid_argument("--pager-busy-poll: npfd runs this client's data path (brokered mode): the "
                                    "pagers are npfd's (npfd --pager-busy-poll)");
    if (o.runToCompletion)
        throw std::invalid_argument("--run-to-completion: npfd runs this client's data path (brokered mode): the "
                                    "fast path is npfd's workers'");
}

// The engine options onto `c`: the in-process engine's, or the one a
// delegated client runs (the interface, its queues and the region's sizes
// are then npfd's and the client's).
void tuneEngine(const Options& o, const Sizes& sz, npf::EngineConfig& c)
{
    c.regionMemory = o.regionMemory == "pool"    ? npf::RegionMemory::PagePool
                     : o.regionMemory == "memfd" ? npf::RegionMemory::Memfd
                     : o.regionMemory == "anon"  ? npf::RegionMemory::Anonymous
                                                 : npf::RegionMemory::Auto;
    c.reserve = sz.reserve;
    c.prefetchDepth = o.prefetch;
    c.reorderTimeout = std::chrono::microseconds(static_cast<int64_t>(o.reorderMs * 1000));
    c.verifyUdpChecksum = !o.noUdpCsum;
    c.runToCompletion = o.runToCompletion;
    c.pagerThreads = o.pagers;
    c.pagerBusyPoll = o.busyPoll;
    c.spillDir = o.spillDir;
}

int run(const Options& o)
{
    const Sizes sz = parseSizes(o);
    checkAddr(o);
    // Checked before anything is attached: a wrong number is a usage error.
    if (o.readyFd >= 0 && ::fcntl(o.readyFd, F_GETFD) < 0)
        throw std::invalid_argument("--ready-fd: " + std::to_string(o.readyFd) + " is not an open file descriptor");
    if (!o.connect && o.clientMode != "auto")
        throw std::invalid_argument("--client-mode: only with --connect");
    if (o.clientMode == "brokered")
        refuseBrokered(o, sz);
    const OutFd out{o.output == "-" ? ::dup(STDOUT_FILENO)
                                    : ::open(o.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (out.fd < 0)
        throw std::system_error(errno, std::generic_category(), "open output " + o.output);
    if (o.connect) {
        npf::ClientConfig cc;
        if (!o.socket.empty())
            cc.socket = o.socket;
        cc.mode = o.clientMode == "delegated"  ? npf::ClientMode::Delegated
                  : o.clientMode == "brokered" ? npf::ClientMode::Brokered
                                               : npf::ClientMode::Auto;
        cc.regionSize = sz.region;
        cc.pageSize = sz.page;
        cc.residentBudget = sz.budget;
        cc.name = "npf-recv";
        tuneEngine(o, sz, cc.engine); // delegated mode: this process runs the engine, tuned as an in-process one
        npf::Client cli(cc);
        if (cli.mode() == npf::ClientMode::Brokered) {
            refuseBrokered(o, sz);
        } else {
            NPF_INFO("npf-recv: npfd delegated %s: this process runs its data path", cli.delegatedIface().c_str());
        }
        npf::Flow& flow = cli.openFlow(o.port, flowOptions(o), o.ifname);
        return receive(o, sz, cli, flow, out);
    }
    npf::EngineConfig ec{.ifname = o.ifname,
                         .mode = o.mode == "skb" ? npf::XdpMode::Skb : npf::XdpMode::Native,
                         .queues = o.queues,
                         .regionSize = sz.region,
                         .residentBudget = sz.budget,
                         .pageSize = sz.page};
    tuneEngine(o, sz, ec);
    npf::Engine eng(ec);
    npf::Flow& flow = eng.openFlow(o.port, flowOptions(o));
    return receive(o, sz, eng, flow, out);
}

// A finite number in [lo, hi] (CLI::Range lets "nan" through).
CLI::Validator number(double lo, double hi, const std::string& desc)
{
    return CLI::Validator(
        [=](std::string& s) {
            double v = 0;
            auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            bool ok = ec == std::errc() && end == s.data() + s.size() && v >= lo && v <= hi;
            return ok ? std::string() : "'" + s + "' is not a number " + desc;
        },
        desc);
}

// The region's options: its size, budget, pages and where they come from.
void addRegionOptions(CLI::App& app, Options& o)
{
    app.add_flag("--cold", o.cold, "start with nothing resident (every first datagram faults)");
    app.add_option("--budget", o.budget,
                   "resident budget of the region, e.g. 4M (0 = unlimited; with --connect: npfd's default, "
                   "the rule's fair share)")
        ->type_name("SIZE");
    app.add_option("--region", o.region, "region size, e.g. 64M, 1G (at most 1T; rounded up to whole pages)")
        ->type_name("SIZE");
    app.add_option("--page-size", o.pageSize,
                   "the region's page size: 4K, or 2M (transparent huge pages from the region's page pool; "
                   "with --region-memory memfd, hugetlbfs: the kernel's huge page pool must hold the budget, or "
                   "the whole region without one; /proc/sys/vm/nr_hugepages)")
        ->check(CLI::IsMember({"4K", "2M"}));
    app.add_option("--region-memory", o.regionMemory,
                   "where the region's pages come from: anon (4K: private memory, a page copied in per "
                   "install and freed per eviction), pool (private memory and a pool of pages moved in and "
                   "out with UFFDIO_MOVE, Linux 6.8), memfd (shmem, or hugetlbfs for 2M), auto (4K: anon or "
                   "pool, whichever is cheaper on this host, measured once; 2M: pool where the kernel has it, "
                   "else memfd; default)")
        ->check(CLI::IsMember({"auto", "anon", "pool", "memfd"}));
    app.add_option("--reserve", o.reserve,
                   "pages allocated at start and kept for the region, e.g. 256M (at most the region): a cold "
                   "region's first installs take them instead of fresh pages from the kernel (not with "
                   "--region-memory memfd); 0 = none; auto (default): with --page-size 2M the budget, else the "
                   "region, at most 1G; with 4K pages none")
        ->type_name("SIZE");
    app.add_option("--spill-dir", o.spillDir, "directory for evicted content ('' = keep it in memory)");
    app.add_option("--buf-size", o.bufSize,
                   "bytes per posted buffer, e.g. 2048, 9K (smaller than a datagram: TRUNCATED)")
        ->type_name("SIZE");
}

// Every option and the help's footer.
void addOptions(CLI::App& app, Options& o)
{
    app.add_option("interface", o.ifname, "interface to receive on")->required();
    app.add_option("port", o.port, "UDP destination port")->required()->check(CLI::Range(1, 65535));
    app.add_option("--addr", o.addr, "only datagrams to this destination address");
    app.add_flag("--credits", o.credits,
                 "grant credits to the sender: it may send as many datagrams as buffers are posted (npf-send)");
    app.add_option("--credit-step", o.creditStep, "with --credits: datagrams of new grant worth a message")
        ->check(CLI::Range(1, NPF_POST_RING_SIZE))
        ->capture_default_str();
    app.add_option("--credit-interval-us", o.creditIntervalUs,
                   "with --credits: at least this many microseconds between two messages")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    app.add_option("-o,--output", o.output, "write payloads here ('-' = stdout)");
    const double kMax = std::numeric_limits<double>::max();
    app.add_option("-n,--count", o.count,
                   "stop after this many datagrams, written or not (lost, bad checksum); 0 = no limit")
        ->check(number(0, kMax, ">= 0"));
    app.add_option("--idle", o.idle, "stop after this many seconds without datagrams (once one arrived)")
        ->check(number(0, kMax, ">= 0"));
    addRegionOptions(app, o);
    app.add_option("--mode", o.mode, "XDP mode if npf-recv attaches the program")
        ->check(CLI::IsMember({"native", "skb"}));
    app.add_option("--queues", o.queues, "RX queues to serve (0 = all)")
        ->check(CLI::Range(0u, static_cast<uint32_t>(NPF_MAX_QUEUES)));
    app.add_option("--prefetch", o.prefetch, "posted buffers to populate after a fault (0 = off)");
    app.add_option("--pagers", o.pagers, "pager threads (the fault path; see docs/architecture.md, Pagers)")
        ->check(CLI::Range(1, 64));
    app.add_flag("--pager-busy-poll", o.busyPoll,
                 "the pagers spin instead of sleeping: a fault is picked up in microseconds instead of a "
                 "wakeup, at the cost of a CPU per pager (docs/architecture.md, Pagers)");
    app.add_option("--reorder-ms", o.reorderMs, "a datagram proven dropped completes LOST this many ms after the proof")
        ->check(number(0.001, 3600e3, "in [0.001 - 3600000]"));
    app.add_flag("--no-udp-csum", o.noUdpCsum, "do not verify UDP checksums (see below)");
    app.add_flag("--run-to-completion", o.runToCompletion,
                 "no worker thread: the receive loop runs the fast path itself (one thread fewer on the CPU, no "
                 "hand-off per batch; the fault path keeps its pagers)");
    app.add_option("--ready-fd", o.readyFd,
                   "once every buffer is posted (datagrams sent from then on find one), write \"ready\\n\" "
                   "to this inherited file descriptor and close it")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()));
    app.add_option("--connect", o.socket,
                   "receive through npfd (the npf daemon) at this socket (default /run/npf/npfd.sock) instead of "
                   "an in-process engine; IFACE is npfd's interface. --mode and --queues are npfd's then; in "
                   "brokered mode so are --prefetch, --pagers, --spill-dir, --reorder-ms and --no-udp-csum, and "
                   "--reserve, --pager-busy-poll and --run-to-completion are refused")
        ->expected(0, 1)
        ->type_name("[SOCKET]");
    app.add_option("--client-mode", o.clientMode,
                   "with --connect, who runs the data path: delegated (this process, on the sockets npfd hands "
                   "it; npfd's config delegates the interface), brokered (npfd), auto (delegated where npfd "
                   "delegates the interface)")
        ->check(CLI::IsMember({"auto", "delegated", "brokered"}))
        ->capture_default_str();
    app.add_flag("--json", o.json, "the exit summary as one JSON object on stderr");
    app.add_flag("-q,--quiet", o.quiet, "no summary on exit");
    app.add_flag("-v,--verbose", o.verbose, "more log output (repeat for more)");
    app.footer("UDP checksums: npf verifies each datagram's UDP checksum while it copies the payload; a\n"
               "wrong one completes BAD_CSUM (counted, not written), never OK. Use --no-udp-csum only for\n"
               "a trusted source that sends partial checksums, e.g. a veth peer with tx checksum offload\n"
               "on (the alternative: `ethtool -K IF tx off` on the sender).\n\n"
               "On every exit (count, idle, SIGINT/SIGTERM) a summary on stderr accounts for every datagram of\n"
               "the flow that reached XDP: written, or lost, bad checksum, dropped in XDP, passed to the\n"
               "kernel, in flight, not polled (docs/cli.md, Accounting).");
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    CLI::App app{"npf-recv: receive UDP datagrams into pageable memory through npf, payloads to a file or stdout"};
    // The libnpf this program runs with (npf/version.h), like every npf program's line.
    app.set_version_flag("--version", std::string("npf-recv ") + npf_version() + " (npf ABI " +
                                          std::to_string(npf_abi_version()) + ")");
    addOptions(app, o);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return app.exit(e);
        fprintf(stderr, "npf-recv: error: %s (npf-recv --help)\n", e.what());
        return npf::exit_codes::kExitUsage;
    }
    o.connect = app.count("--connect") > 0;
    npf::log::setVerbosity(o.verbose, npf::log::Level::Info);
    npf::log::routeLibbpf();
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return run(o);
    } catch (const std::exception& e) {
        fprintf(stderr, "npf-recv: error: %s\n", e.what());
        return npf::exit_codes::exitCodeFor(e);
    }
}
