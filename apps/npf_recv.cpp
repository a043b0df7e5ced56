// npf-recv: receive UDP datagrams on a port into pageable memory through npf
// and write each payload, in completion order, to a file or stdout. Think
// `nc -lu`, but through npf. Stats go to stderr on exit.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ctl/errors.h"
#include "ctl/exit_codes.h"
#include "ctl/flows.h"
#include "ctl/sizes.h"
#include "npf/engine.h"
#include "sys/fd.h"
#include "sys/log.h"

namespace {

std::atomic<bool> g_stop{false};

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
    std::string region = "64M", budget = "0", bufSize = "2048"; // sizes: see parseSizes
    uint16_t port = 0;
    uint32_t queues = 0, prefetch = 256;
    uint64_t count = 0;
    double idle = 0, reorderMs = 1.0;
    bool cold = false, quiet = false;
    int verbose = 0;
};

// The size options, in bytes.
struct Sizes {
    uint64_t region = 0; // whole pages
    uint64_t budget = 0;
    uint32_t buf = 0;
};

// Throws ArgumentError naming the option.
Sizes parseSizes(const Options& o)
{
    using npf::ctl::ArgumentError;
    using npf::ctl::parseSize;
    constexpr uint64_t kMaxRegion = NPF_MAX_REGION_PAGES * NPF_PAGE_SIZE;
    Sizes s;
    s.region = parseSize("--region", o.region);
    if (s.region == 0 || s.region > kMaxRegion)
        throw ArgumentError("--region: '" + o.region + "' is out of range (1 .. 1T)");
    s.region = (s.region + NPF_PAGE_SIZE - 1) / NPF_PAGE_SIZE * NPF_PAGE_SIZE;
    s.budget = parseSize("--budget", o.budget);
    const uint64_t maxBuf = std::min<uint64_t>(s.region, UINT32_MAX);
    const uint64_t buf = parseSize("--buf-size", o.bufSize);
    if (buf == 0 || buf > maxBuf)
        throw ArgumentError("--buf-size: '" + o.bufSize + "' is out of range (1 .. " + std::to_string(maxBuf) +
                            ", the region size)");
    s.buf = static_cast<uint32_t>(buf);
    return s;
}

// Engine::openFlow checks the address only once the program is attached.
void checkAddr(const Options& o)
{
    try {
        npf::ctl::parseFlowSpec(std::to_string(o.port), o.addr);
    } catch (const npf::ctl::ArgumentError& e) {
        throw npf::ctl::ArgumentError(std::string("--addr: ") + e.what());
    }
}

int run(const Options& o)
{
    const Sizes sz = parseSizes(o);
    checkAddr(o);
    npf::EngineConfig cfg;
    cfg.ifname = o.ifname;
    cfg.mode = o.mode == "skb" ? npf::XdpMode::Skb : npf::XdpMode::Native;
    cfg.queues = o.queues;
    cfg.regionSize = sz.region;
    cfg.residentBudget = sz.budget;
    cfg.prefetchDepth = o.prefetch;
    cfg.spillDir = o.spillDir;
    cfg.reorderTimeout = std::chrono::microseconds(static_cast<int64_t>(o.reorderMs * 1000));

    npf::Fd out(o.output == "-" ? ::dup(STDOUT_FILENO)
                                : ::open(o.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out)
        throw std::system_error(errno, std::generic_category(), "open output " + o.output);

    npf::Engine eng(cfg);
    npf::Flow& flow = eng.openFlow(o.port, o.addr);
    const uint64_t slots = cfg.regionSize / sz.buf;
    const uint64_t depth = std::min<uint64_t>(slots, NPF_POST_RING_SIZE);
    if (!o.cold)
        eng.populate(0, std::min<uint64_t>(cfg.regionSize, depth * sz.buf));
    uint64_t next = 0; // next slot to post
    auto postNext = [&] {
        flow.post((next % slots) * sz.buf, sz.buf);
        next++;
    };
    for (uint64_t i = 0; i < depth; i++)
        postNext();
    NPF_INFO("npf-recv: %s port %u: %llu buffers of %u bytes posted in a %llu MiB region (%s), budget %s",
             o.ifname.c_str(), o.port, static_cast<unsigned long long>(depth), sz.buf,
             static_cast<unsigned long long>(cfg.regionSize >> 20), o.cold ? "cold" : "warm",
             cfg.residentBudget ? o.budget.c_str() : "unlimited");

    uint64_t received = 0, bytes = 0, lost = 0, truncated = 0;
    auto lastData = std::chrono::steady_clock::now();
    std::vector<npf_completion> batch(256);
    bool failed = false;
    while (!g_stop.load() && (o.count == 0 || received + lost < o.count)) {
        size_t n = flow.wait(batch, std::chrono::milliseconds(50));
        auto now = std::chrono::steady_clock::now();
        if (n == 0) {
            if (o.idle > 0 && received + lost > 0 &&
                std::chrono::duration<double>(now - lastData).count() >= o.idle)
                break;
            continue;
        }
        lastData = now;
        for (size_t i = 0; i < n && !failed; i++) {
            const npf_completion& c = batch[i];
            if (c.status == NPF_CS_LOST) {
                lost++;
                NPF_WARN_RL("npf-recv: seq %llu lost", static_cast<unsigned long long>(c.seq));
            } else {
                truncated += c.status == NPF_CS_TRUNCATED;
                received++;
                bytes += c.len;
                if (!writeAll(out.get(), eng.region() + c.offset, c.len)) {
                    NPF_ERR("npf-recv: writing %s: %s", o.output.c_str(), strerror(errno));
                    failed = true;
                }
            }
            postNext();
        }
        if (failed)
            break;
    }

    npf::EngineStats s = eng.stats();
    if (!o.quiet) {
        fprintf(stderr,
                "npf-recv: %llu datagrams, %llu bytes, %llu lost, %llu truncated\n"
                "  fast path %llu, fault path %llu (deferred %llu), cpu faults %llu, packet faults %llu, "
                "prefetched %llu, evicted %llu\n"
                "  dropped: rejected %llu, mismatch %llu, place errors %llu, bad meta %llu, kernel rx %llu\n"
                "  resident %llu pages (%.1f MiB) of %llu MiB region, pinned UMEM %.1f MiB\n"
                "  fault latency (steer -> placed): n=%llu p50=%.1f us p99=%.1f us p999=%.1f us\n"
                "  fast latency (steer -> placed):  n=%llu p50=%.1f us p99=%.1f us\n",
                (unsigned long long)received, (unsigned long long)bytes, (unsigned long long)lost,
                (unsigned long long)truncated, (unsigned long long)s.fastPath, (unsigned long long)s.faultPath,
                (unsigned long long)s.deferred, (unsigned long long)s.cpuFaults,
                (unsigned long long)s.packetFaults, (unsigned long long)s.prefetched,
                (unsigned long long)s.evicted, (unsigned long long)s.rejected, (unsigned long long)s.mismatch,
                (unsigned long long)s.placeErrors, (unsigned long long)s.badMeta,
                (unsigned long long)s.kernelRxDropped, (unsigned long long)s.residentPages,
                s.residentPages * 4096.0 / (1 << 20), (unsigned long long)(cfg.regionSize >> 20),
                s.pinnedBytes / double(1 << 20), (unsigned long long)s.faultTotal.count, s.faultTotal.p50 / 1e3,
                s.faultTotal.p99 / 1e3, s.faultTotal.p999 / 1e3, (unsigned long long)s.fastTotal.count,
                s.fastTotal.p50 / 1e3, s.fastTotal.p99 / 1e3);
    }
    return failed ? npf::ctl::kExitFailure : npf::ctl::kExitOk;
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

} // namespace

int main(int argc, char** argv)
{
    Options o;
    CLI::App app{"npf-recv: receive UDP datagrams into pageable memory through npf, payloads to a file or stdout"};
    app.add_option("interface", o.ifname, "interface to receive on")->required();
    app.add_option("port", o.port, "UDP destination port")->required()->check(CLI::Range(1, 65535));
    app.add_option("--addr", o.addr, "only datagrams to this destination address");
    app.add_option("-o,--output", o.output, "write payloads here ('-' = stdout)");
    const double kMax = std::numeric_limits<double>::max();
    app.add_option("-n,--count", o.count, "stop after this many datagrams (0 = no limit)")
        ->check(number(0, kMax, ">= 0"));
    app.add_option("--idle", o.idle, "stop after this many seconds without datagrams (once one arrived)")
        ->check(number(0, kMax, ">= 0"));
    app.add_flag("--cold", o.cold, "start with nothing resident (every first datagram faults)");
    app.add_option("--budget", o.budget, "resident budget of the region, e.g. 4M (0 = unlimited)")->type_name("SIZE");
    app.add_option("--region", o.region, "region size, e.g. 64M, 1G (at most 1T)")->type_name("SIZE");
    app.add_option("--spill-dir", o.spillDir, "directory for evicted content ('' = keep it in memory)");
    app.add_option("--buf-size", o.bufSize,
                   "bytes per posted buffer, e.g. 2048, 9K (smaller than a datagram: TRUNCATED)")
        ->type_name("SIZE");
    app.add_option("--mode", o.mode, "XDP mode if npf-recv attaches the program")
        ->check(CLI::IsMember({"native", "skb"}));
    app.add_option("--queues", o.queues, "RX queues to serve (0 = all)")
        ->check(CLI::Range(0u, static_cast<uint32_t>(NPF_MAX_QUEUES)));
    app.add_option("--prefetch", o.prefetch, "posted buffers to populate after a fault (0 = off)");
    app.add_option("--reorder-ms", o.reorderMs, "a missing datagram completes LOST after this many ms")
        ->check(number(0.001, 3600e3, "in [0.001 - 3600000]"));
    app.add_flag("-q,--quiet", o.quiet, "no stats on exit");
    app.add_flag("-v,--verbose", o.verbose, "more log output (repeat for more)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return app.exit(e);
        fprintf(stderr, "npf-recv: error: %s (npf-recv --help)\n", e.what());
        return npf::ctl::kExitUsage;
    }
    npf::log::setVerbosity(o.verbose, npf::log::Level::Info);
    npf::log::routeLibbpf();
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return run(o);
    } catch (const std::exception& e) {
        fprintf(stderr, "npf-recv: error: %s\n", e.what());
        return npf::ctl::exitCodeFor(e);
    }
}
