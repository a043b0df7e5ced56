#include "scenarios.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <vector>

#include "npf/counters.h"

#include "burst.h"
#include "credits.h"
#include "control_check.h"
#include "run.h"

namespace npf::bench {
namespace {

double mib(uint64_t b) { return double(b) / (1 << 20); }

// Engine::statsJson(): {"counters": {...}, "latency": {"fault_total": {"p50_ns": ...}}}.
Json engineLatency(const Json& details, const char* stage)
{
    if (details.contains("latency") && details["latency"].contains(stage))
        return details["latency"][stage];
    return Json();
}

uint64_t detail(const Json& d, const char* key)
{
    if (d.contains("counters") && d["counters"].contains(key) && d["counters"][key].is_number())
        return d["counters"][key].get<uint64_t>();
    return 0;
}

void writeBins(const Options& o, const std::string& file, const RunResult& r)
{
    std::ofstream f(o.outDir + "/" + file);
    f << "# ms received_kpps\n";
    for (size_t i = 0; i < r.bins.size(); i++)
        f << i << " " << r.bins[i] << "\n"; // packets per 1 ms bin = kpps
}

void writeCdf(const Options& o, const std::string& file, const RunResult& r)
{
    std::ofstream f(o.outDir + "/" + file);
    f << "# latency_us cumulative_fraction\n";
    for (auto& [ns, frac] : latencyCdf(r.latency))
        f << double(ns) / 1e3 << " " << frac << "\n";
}

// Quantile `q` ("p50_ns", "p99_ns", "p999_ns") of a fault stage, in us (0: not measured).
double stageUs(const Json& details, const char* stage, const char* q)
{
    const Json l = engineLatency(details, stage);
    return l.is_null() ? 0.0 : l.value(q, 0.0) / 1e3;
}

void header(const char* title)
{
    printf("\n== %s ==\n", title);
}

// One line per contender: rates with the CPU they cost beside them (every
// thread of the contender's, helpers such as npfd included), loss,
// app-level latency, memory, and the set-up the window left out.
// Each contender's route (where its pages come from) and what its page
// pool did in the window: a run whose pool allocated fresh pages inside it
// ran at the machine's fresh-page rate there, and says so.
void routeTable(const std::vector<RunResult>& rs)
{
    printf("%-15s %-20s %10s %10s %8s %10s %10s\n", "contender", "route", "pool take", "fresh", "refills",
           "returned", "freed");
    std::string fresh;
    for (auto& r : rs) {
        if (!r.error.empty() && r.received == 0)
            continue;
        const PoolWindow& p = r.pool;
        printf("%-15s %-20s %10llu %10llu %8llu %10llu %10llu\n", r.kind.c_str(), r.route.c_str(),
               (unsigned long long)p.taken, (unsigned long long)p.fresh, (unsigned long long)p.refills,
               (unsigned long long)p.returned, (unsigned long long)p.freed);
        if (p.fresh)
            fresh += (fresh.empty() ? "" : ", ") + r.kind + " " + std::to_string(p.fresh);
    }
    if (!fresh.empty())
        printf("(fresh pages allocated inside the window: %s; those installs ran at the fresh-page rate)\n",
               fresh.c_str());
}

void throughputTable(const std::vector<RunResult>& rs)
{
    printf("%-15s %9s %9s %9s %9s %9s %6s %9s %9s %9s %9s %9s %9s\n", "contender", "offered", "recv",
           "cpu ns/dg", "steady", "lost", "bad", "lat p50", "lat p99", "lat p999", "pinnedMiB", "residMiB",
           "setup ms");
    for (auto& r : rs) {
        if (!r.error.empty() && r.received == 0) {
            printf("%-15s ERROR %s\n", r.kind.c_str(), r.error.c_str());
            continue;
        }
        printf("%-15s %8.3fM %8.3fM %9.0f %8.3fM %9llu %6llu %7.1fus %7.1fus %7.1fus %9.1f %9.1f %9.1f\n",
               r.kind.c_str(), r.offeredPps / 1e6, r.pps / 1e6, r.cpuNsPerPacket(), r.steadyPps / 1e6,
               (unsigned long long)r.lost(), (unsigned long long)r.bad, r.latency.quantile(0.5) / 1e3,
               r.latency.quantile(0.99) / 1e3, r.latency.quantile(0.999) / 1e3, mib(r.pinnedBytes),
               mib(r.residentBytes), r.setupSeconds * 1e3);
    }
    printf("(set-up, excluded from the window: populate, mlock, pool warm-up, huge pages, npfd; "
           "cpu ns/dg: all the contender's threads per datagram received)\n");
    routeTable(rs);
}

Json runsJson(const std::vector<RunResult>& rs)
{
    Json a = Json::array();
    for (auto& r : rs)
        a.push_back(r.toJson());
    return a;
}

const RunResult* find(const std::vector<RunResult>& rs, const std::string& k)
{
    for (auto& r : rs)
        if (r.kind == k)
            return &r;
    return nullptr;
}

// npfd's clients against in-process npf in the same scenario: received pps
// and CPU per packet (npfd's CPU included), as ratios sidecar / in-process:
// delegated (npf-sidecar, -2m: the 0.95x target) and brokered; and
// the brokered client's mapping against npfd's own.
void sidecarVsNpf(const std::vector<RunResult>& rs, Json& j)
{
    const struct {
        const char *sidecar, *other, *key;
    } pairs[] = {{"npf-sidecar", "npf", "sidecarVsNpf"},
                 {"npf-sidecar-2m", "npf-2m", "sidecar2mVsNpf2m"},
                 {"npf-sidecar-brokered", "npf", "brokeredVsNpf"},
                 {"npf-sidecar-brokered-2m", "npf-2m", "brokered2mVsNpf2m"},
                 {"npf-sidecar-brokered", "npf-sidecar-own", "brokeredVsOwnMapping"}};
    for (const auto& p : pairs) {
        const RunResult *s = find(rs, p.sidecar), *n = find(rs, p.other);
        if (!n || !s || n->pps <= 0 || n->cpuNsPerPacket() <= 0)
            continue;
        const double pps = s->pps / n->pps, cpu = s->cpuNsPerPacket() / n->cpuNsPerPacket();
        j[p.key] = {{"pps", pps}, {"cpuNsPerPacket", cpu}};
        printf("%s / %s: pps %.3f, cpu ns/packet %.3f\n", p.sidecar, p.other, pps, cpu);
    }
}

// The control's check (control_check.h) as JSON.
Json controlJson(const ControlCheck& c, const RunResult& p, double steadyCpuNs)
{
    return {{"verdict", c.name()},
            {"cpuNsPerPacket", p.cpuNsPerPacket()},
            {"steadyCpuNsPerPacket", steadyCpuNs},
            {"cpuRatio", c.cpuRatio}};
}

// npf with 4 KiB and with 2 MiB pages against static-pinned in the same
// scenario: received pps as ratios (the targets are ratios), unless
// the control was starved there (control_check.h).
void pagesVsPinned(const std::vector<RunResult>& rs, const Options& o, Json& j)
{
    const RunResult* p = find(rs, "static-pinned");
    if (!p)
        return;
    const double steadyCpuNs = o.steadyOf("static-pinned").cpuNs;
    const ControlCheck c = checkControl(p->cpuNsPerPacket(), steadyCpuNs);
    Json r{{"control", controlJson(c, *p, steadyCpuNs)}};
    if (c.verdict == ControlCheck::Verdict::Starved) {
        r["withheld"] = "control starved: ratio withheld";
        if (p->received)
            printf("static-pinned: control starved: ratio withheld (%.0f ns CPU per datagram here, %.1fx its %.0f "
                   "ns in the steady state)\n",
                   p->cpuNsPerPacket(), c.cpuRatio, steadyCpuNs);
        else
            printf("static-pinned: control starved: ratio withheld (it received nothing)\n");
        j["vsStaticPinned"] = r;
        return;
    }
    char note[96] = "control unchecked: no steady-state static-pinned in this run";
    if (c.verdict == ControlCheck::Verdict::Ok)
        snprintf(note, sizeof note, "control ok: %.2fx its steady-state CPU per datagram", c.cpuRatio);
    for (const char* k : {"npf", "npf-reserve", "npf-pool", "npf-memfd", "npf-2m", "npf-2m-hugetlbfs", "npf-rtc", "npf-2m-rtc"})
        if (const RunResult* n = find(rs, k)) {
            r[k] = n->pps / p->pps;
            printf("%s / static-pinned: received pps %.3f (%s)\n", k, n->pps / p->pps, note);
        }
    j["vsStaticPinned"] = r;
}

// The scenario's contenders; with -c, those of them it names, in its order
// (so that rounds can alternate which one runs first).
std::vector<RunResult> runAll(const std::vector<std::string>& kinds, RunSpec spec, const TrafficConfig& t,
                              const RxConfig& rx, const Options& o)
{
    std::vector<std::string> order;
    for (auto& k : o.only.empty() ? kinds : o.only)
        if (std::find(kinds.begin(), kinds.end(), k) != kinds.end())
            order.push_back(k);
    std::vector<RunResult> rs;
    for (auto& k : order) {
        if (g_interrupted)
            break;
        spec.kind = k;
        rs.push_back(runOne(spec, t, rx, o.verbose));
    }
    return rs;
}

TrafficConfig trafficFor(Env& env, const Options& o, double pps, uint32_t payload)
{
    TrafficConfig t = env.traffic();
    t.payload = payload;
    t.pps = pps;
    t.flows = o.flows;
    t.cpus = o.genCpus;
    t.udpCsum = o.udpCsum;
    return t;
}

RxConfig rxFor(Env& env, const Options& o, uint32_t payload)
{
    RxConfig r = env.rx();
    r.payload = payload;
    r.cpus = o.rxCpus;
    r.regionSize = o.region;
    r.verbose = o.verbose;
    r.npfd = o.npfd;
    r.releaseMin = o.releaseMin;
    r.pagers = o.pagers;
    return r;
}

// A scenario's runs, under its title, on a fresh veth pair: `kinds` (see
// runAll) under traffic of o.payload at `pps` (0: as fast as the generator
// goes) into the receiver rxFor sets up, after `tune`; prints the
// throughput table.
std::vector<RunResult> runTable(const char* title, const Options& o, const std::vector<std::string>& kinds, double pps,
                                const std::function<void(RxConfig&)>& tune = {})
{
    header(title);
    Env env({});
    RxConfig rx = rxFor(env, o, o.payload);
    if (tune)
        tune(rx);
    RunSpec spec{.sender = o.sender, .seconds = o.seconds};
    std::vector<RunResult> rs = runAll(kinds, spec, trafficFor(env, o, pps, o.payload), rx, o);
    throughputTable(rs);
    return rs;
}

// 1. Everything resident, as fast as the generator goes.
Json steady(const Options& o)
{
    auto rs = runTable("steady state: everything resident, max rate", o,
                       {"npf", "npf-rtc", "npf-2m", "npf-sidecar", "npf-sidecar-2m", "npf-sidecar-brokered",
                        "npf-sidecar-own", "static-pinned", "xdp-drop", "recvmmsg", "io_uring"},
                       0);
    Json j{{"payload", o.payload}, {"regionMiB", mib(o.region)}, {"runs", runsJson(rs)}};
    const RunResult *n = find(rs, "npf"), *p = find(rs, "static-pinned"), *k = find(rs, "recvmmsg");
    if (n && p && k && p->pps > 0 && k->pps > 0) {
        j["npfVsStaticPinned"] = n->pps / p->pps;
        j["npfVsRecvmmsg"] = n->pps / k->pps;
        printf("npf / static-pinned = %.2f (target >= 0.85), npf / recvmmsg = %.2f (target >= 1.5)\n",
               n->pps / p->pps, n->pps / k->pps);
    }
    sidecarVsNpf(rs, j);
    for (auto& r : rs)
        writeCdf(o, "cdf_steady_" + r.kind + ".dat", r);
    return j;
}

// 2. Region entirely non-resident at t=0, full rate.
Json cold(const Options& o)
{
    auto rs = runTable("cold ring: region non-resident at t=0", o,
                       {"npf", "npf-reserve", "npf-pool", "npf-memfd", "npf-2m", "npf-2m-hugetlbfs", "npf-sidecar",
                        "npf-sidecar-brokered", "npf-sidecar-own", "npf-noprefetch", "drop-on-fault", "blocking",
                        "static-pinned"},
                       o.coldRate, [](RxConfig& rx) { rx.cold = true; });
    // "first": the first 1 ms bin with a datagram received; the pipeline's
    // own start (generator, veth, AF_XDP) shows in static-pinned's, which
    // never faults: compare t90 with that, in the same run.
    printf("%-15s %9s %10s %10s %9s %9s %9s %9s %11s\n", "contender", "first(ms)", "t90% (ms)", "lost", "faults",
           "prefetch", "flt p50", "flt p99", "flt p99.9");
    Json runs = Json::array();
    for (auto& r : rs) {
        Json jr = r.toJson();
        const int t90 = timeToFraction(r.bins, r.steadyPps / 1000, 0.9);
        const auto firstBin = std::find_if(r.bins.begin(), r.bins.end(), [](uint32_t b) { return b > 0; });
        const int first = firstBin == r.bins.end() ? -1 : int(firstBin - r.bins.begin());
        jr["timeTo90PctMs"] = t90;
        jr["firstDataMs"] = first;
        runs.push_back(jr);
        printf("%-15s %9d %10d %10llu %9llu %9llu %7.1fus %7.1fus %9.1fus\n", r.kind.c_str(), first, t90,
               (unsigned long long)r.lost(), (unsigned long long)detail(r.details, "packet_faults"),
               (unsigned long long)detail(r.details, "prefetched"), stageUs(r.details, "fault_total", "p50_ns"),
               stageUs(r.details, "fault_total", "p99_ns"), stageUs(r.details, "fault_total", "p999_ns"));
        writeBins(o, "cold_" + r.kind + ".dat", r);
        writeCdf(o, "cdf_cold_" + r.kind + ".dat", r);
    }
    const RunResult* sp = find(rs, "static-pinned");
    printf("(static-pinned is not cold: it pinned and prefaulted %.0f MiB in its set-up, before the window, in %.1f ms)\n",
           mib(o.region), sp && sp->details.contains("pinSeconds") ? sp->details["pinSeconds"].get<double>() * 1e3 : 0.0);
    Json j{{"payload", o.payload}, {"regionMiB", mib(o.region)}, {"offeredPps", o.coldRate}, {"runs", runs}};
    pagesVsPinned(rs, o, j);
    sidecarVsNpf(rs, j);
    return j;
}

// 3. Working set larger than the budget: eviction keeps running.
Json pressure(const Options& o)
{
    const uint64_t budget = o.region / 4;
    auto rs = runTable("memory pressure: working set 4x the resident budget", o,
                       {"npf", "npf-pool", "npf-memfd", "npf-2m", "npf-2m-hugetlbfs", "npf-sidecar", "npf-sidecar-2m",
                        "npf-sidecar-brokered", "npf-sidecar-brokered-2m", "npf-sidecar-own", "npf-noprefetch",
                        "drop-on-fault", "static-pinned"},
                       o.coldRate, [&](RxConfig& rx) { rx.budget = budget; });
    Json runs = Json::array();
    printf("%-15s %12s %12s %12s %10s %10s\n", "contender", "faults/s", "prefetch/s", "evicted/s", "residMiB",
           "pinnedMiB");
    for (auto& r : rs) {
        Json jr = r.toJson();
        const double s = r.seconds;
        const double f = double(detail(r.details, "packet_faults") + detail(r.details, "cpu_faults")) / s;
        jr["faultsPerSecond"] = f;
        jr["prefetchedPerSecond"] = double(detail(r.details, "prefetched")) / s;
        jr["evictedPerSecond"] = double(detail(r.details, "evicted")) / s;
        runs.push_back(jr);
        printf("%-15s %12.0f %12.0f %12.0f %10.1f %10.1f\n", r.kind.c_str(), f,
               double(detail(r.details, "prefetched")) / s, double(detail(r.details, "evicted")) / s,
               mib(r.residentBytes), mib(r.pinnedBytes));
        writeBins(o, "pressure_" + r.kind + ".dat", r);
    }
    Json j{{"payload", o.payload},   {"regionMiB", mib(o.region)}, {"budgetMiB", mib(budget)},
           {"offeredPps", o.coldRate}, {"runs", runs}};
    pagesVsPinned(rs, o, j);
    sidecarVsNpf(rs, j);
    return j;
}

// The fault path's bound at 4 KiB: one datagram per page here, so the
// start's rate of recycled pages each read once by the receiver
// (PageRates::touchedPerSec), and each 4 KiB contender's share of it.
void installBound(const std::vector<RunResult>& rs, const Options& o, Json& j)
{
    if (o.installBoundPerSec <= 0)
        return;
    const double bound = o.installBoundPerSec; // datagrams/s: one per page
    j["boundPps"] = bound;
    printf("bound (4 KiB, one datagram per page): recycled pages + a first touch, %.3f M/s at the start;", bound / 1e6);
    Json share = Json::object(), offered = Json::object();
    for (const RunResult& r : rs)
        if (r.route.find("4k") != std::string::npos) {
            share[r.kind] = r.pps / bound;
            printf(" %s %.2fx", r.kind.c_str(), r.pps / bound);
            // A sender that offers less than the bound (sendmmsg) is the limit,
            // not the pages: the share of what it offered says how npf did.
            if (r.offeredPps > 0 && r.offeredPps < bound) {
                offered[r.kind] = r.pps / r.offeredPps;
                printf(" (%.2fx of the %.3f M/s offered: the sender was the limit)", r.pps / r.offeredPps,
                       r.offeredPps / 1e6);
            }
        }
    printf("\n");
    j["vsBound"] = share;
    if (!offered.empty())
        j["vsOfferedBelowBound"] = offered;
}

// The fault path with its pages reserved before the window (npf-reserve)
// against the fast path of the same run: its rate as a share of
// static-pinned's steady rate, its CPU per datagram as a multiple of npf's
// steady one (issue 38's targets: >= 0.5x, <= 2x).
void reservedVsSteady(const std::vector<RunResult>& rs, const Options& o, Json& j)
{
    const RunResult* r = find(rs, "npf-reserve");
    const Options::Steady pinned = o.steadyOf("static-pinned"), fast = o.steadyOf("npf");
    if (!r || pinned.pps <= 0 || fast.cpuNs <= 0)
        return;
    const double rate = r->pps / pinned.pps, cpu = r->cpuNsPerPacket() / fast.cpuNs;
    j["reservedVsSteady"] = {{"ppsVsStaticPinnedSteady", rate}, {"cpuVsNpfSteady", cpu}};
    printf("npf-reserve (a reserved 4 KiB pool): %.3f M/s = %.2fx static-pinned's steady %.3f M/s, %.0f ns CPU per "
           "datagram = %.2fx npf's steady %.0f ns\n",
           r->pps / 1e6, rate, pinned.pps / 1e6, r->cpuNsPerPacket(), cpu, fast.cpuNs);
}

// 4. Every packet faults: one datagram per page, budget far below the region.
Json faultpath(const Options& o)
{
    const uint64_t region = std::max<uint64_t>(o.region * 4, 256ull << 20);
    const uint64_t budget = 32ull << 20; // above the 16 MiB of posted buffers, far below the region
    auto rs = runTable("fault path alone: every datagram lands on a non-resident page", o,
                       {"npf-noprefetch", "npf", "npf-reserve", "npf-pool", "npf-memfd", "npf-2m", "npf-2m-hugetlbfs", "npf-rtc", "npf-2m-rtc",
                        "npf-sidecar", "npf-sidecar-2m", "npf-sidecar-brokered", "npf-sidecar-brokered-2m",
                        "npf-sidecar-own", "static-pinned"},
                       0, [&](RxConfig& rx) {
                           rx.regionSize = region;
                           rx.stride = 4096;
                           rx.bufLen = 4096;
                           rx.budget = budget;
                       });
    Json runs = Json::array();
    printf("%-15s %14s %14s %12s %12s %10s\n", "contender", "pkt faults/s", "+prefetch/s", "flt p50", "flt p99",
           "pager cpu");
    for (auto& r : rs) {
        Json jr = r.toJson();
        const double pf = double(detail(r.details, "packet_faults")) / r.seconds;
        const double pre = double(detail(r.details, "prefetched")) / r.seconds;
        jr["packetFaultsPerSecond"] = pf;
        jr["pagesInstalledPerSecond"] = pf + pre;
        runs.push_back(jr);
        printf("%-15s %14.0f %14.0f %10.1fus %10.1fus %10s\n", r.kind.c_str(), pf, pf + pre,
               stageUs(r.details, "fault_total", "p50_ns"), stageUs(r.details, "fault_total", "p99_ns"), "1 core");
    }
    Json j{{"payload", o.payload}, {"regionMiB", mib(region)}, {"budgetMiB", mib(budget)}, {"runs", runs}};
    installBound(rs, o, j);
    reservedVsSteady(rs, o, j);
    pagesVsPinned(rs, o, j);
    sidecarVsNpf(rs, j);
    return j;
}

// The pager's fault-path batches by size (datagrams picked up at once).
void printBatchSizes(const Json& details)
{
    const char* buckets[][2] = {{"1", "fault_batches_1"},       {"2-3", "fault_batches_2_3"},
                                {"4-7", "fault_batches_4_7"},   {"8-15", "fault_batches_8_15"},
                                {"16-31", "fault_batches_16_31"}, {"32+", "fault_batches_32_up"}};
    printf("%-42s", "  batches by datagrams");
    for (auto& b : buckets)
        printf(" %s: %llu", b[0], (unsigned long long)detail(details, b[1]));
    printf("\n");
}

// Fault handling time by stage, one-page and two-page datagrams, at a low
// rate so every fault is measured alone.
Json stages(const Options& o)
{
    header("fault-handling time by stage (every datagram faults, low rate)");
    struct Case {
        const char* name;
        uint32_t payload, skew, mtu;
        bool busyPoll;
    };
    const Case cases[] = {{"one page (1472 B)", 1472, 0, 1500, false},
                          {"two pages (3000 B across a page border)", 3000, 2048, 3100, false},
                          {"one page, busy-polling pager", 1472, 0, 1500, true},
                          {"two pages, busy-polling pager", 3000, 2048, 3100, true}};
    Json out = Json::array();
    // Per datagram; the first five add up to fault_total.
    std::vector<const char*> stageNames;
    for (auto member : npf::kFaultStages)
        for (const npf::LatencyDef& d : npf::kEngineLatencies)
            if (d.member == member)
                stageNames.push_back(d.name);
    printf("%-42s", "stage (us) p50 / p99 / p99.9");
    for (auto* s : stageNames)
        printf(" %25s", s);
    printf("\n");
    for (const Case& c : cases) {
        if (g_interrupted)
            break;
        Env env({.queues = 1, .mtu = int(c.mtu)});
        auto t = trafficFor(env, o, o.quick ? 20000 : 50000, c.payload);
        auto rx = rxFor(env, o, c.payload);
        rx.regionSize = 512ull << 20; // never wraps at this rate: every datagram a fresh page
        rx.stride = 8192;
        rx.skew = c.skew;
        rx.bufLen = 4096;
        rx.cold = true;
        rx.frameSize = c.payload > 1700 ? 4096 : 2048;
        rx.pagerBusyPoll = c.busyPoll;
        RunSpec spec{.kind = "npf-noprefetch", .sender = o.sender, .seconds = std::min(o.seconds, 1.0)};
        RunResult r = runOne(spec, t, rx, o.verbose);
        Json jc{{"case", c.name}, {"payload", c.payload}, {"run", r.toJson()}};
        printf("%-42s", c.name);
        for (auto* s : stageNames) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.1f/%.1f/%.1f", stageUs(r.details, s, "p50_ns"), stageUs(r.details, s, "p99_ns"),
                     stageUs(r.details, s, "p999_ns"));
            printf(" %25s", buf);
        }
        printf("   (n=%llu faults, %.3f M datagrams/s at %.0f ns CPU each, app latency p50 %.1f us)\n",
               (unsigned long long)detail(r.details, "packet_faults"), r.pps / 1e6, r.cpuNsPerPacket(),
               r.latency.quantile(0.5) / 1e3);
        printBatchSizes(r.details);
        out.push_back(jc);
    }
    return {{"cases", out}};
}

// 5. 1 vs 2 queues, payload sweep.
Json scaling(const Options& o)
{
    header("scaling: payload sizes (1 queue) and 1 vs 2 queues");
    Json payloads = Json::array(), queues = Json::array();
    std::vector<uint32_t> sizes = o.quick ? std::vector<uint32_t>{64, 1472} : std::vector<uint32_t>{64, 256, 512, 1024, 1472};
    Options q = o;
    q.seconds = o.quick ? o.seconds : std::min(o.seconds, 1.0);
    {
        Env env({});
        printf("%-8s %-15s %10s %10s %10s %10s\n", "payload", "contender", "recv Mpps", "cpu ns/dg", "Gbit/s", "lost");
        for (uint32_t p : sizes) {
            auto t = trafficFor(env, q, 0, p);
            auto rx = rxFor(env, q, p);
            RunSpec spec{.sender = o.sender, .seconds = q.seconds};
            for (auto& r : runAll({"npf", "static-pinned", "recvmmsg"}, spec, t, rx, q)) {
                printf("%-8u %-15s %10.3f %10.0f %10.2f %10llu\n", p, r.kind.c_str(), r.pps / 1e6, r.cpuNsPerPacket(),
                       double(r.bytes) * 8 / r.seconds / 1e9, (unsigned long long)r.lost());
                Json jr = r.toJson();
                jr["payload"] = p;
                payloads.push_back(jr);
            }
        }
    }
    {
        Env env({.queues = 2});
        printf("%-8s %-15s %10s %10s %10s %10s\n", "queues", "contender", "recv Mpps", "cpu ns/dg", "Gbit/s", "lost");
        for (int nq : {1, 2}) {
            Options qq = q;
            // veth picks the peer's RX queue by the sending CPU: one generator thread per queue.
            qq.genCpus = nq == 1 ? o.genCpus : std::vector<int>{0, 1};
            qq.rxCpus = nq == 1 ? o.rxCpus : std::vector<int>{0, 1};
            auto t = trafficFor(env, qq, 0, o.payload);
            auto rx = rxFor(env, qq, o.payload);
            rx.queues = uint32_t(nq);
            RunSpec spec{.sender = o.sender, .seconds = q.seconds};
            for (auto& r : runAll({"npf", "static-pinned"}, spec, t, rx, qq)) {
                printf("%-8d %-15s %10.3f %10.0f %10.2f %10llu\n", nq, r.kind.c_str(), r.pps / 1e6, r.cpuNsPerPacket(),
                       double(r.bytes) * 8 / r.seconds / 1e9, (unsigned long long)r.lost());
                Json jr = r.toJson();
                jr["queues"] = nq;
                queues.push_back(jr);
            }
        }
    }
    return {{"payloads", payloads}, {"queues", queues}};
}

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Datagrams a contender refused for a wrong UDP checksum (npf: engine
// counter; kernel sockets: the namespace's UDP InCsumErrors).
uint64_t csumErrors(const RunResult& r)
{
    if (r.details.contains("udpInCsumErrors"))
        return r.details["udpInCsumErrors"].get<uint64_t>();
    return detail(r.details, "csum_errors");
}

// 6. The cost of UDP checksum verification end to end: the steady state
// with correct checksums (npf and the kernel verify them) and with checksum
// 0 (nothing to verify), alternating per contender and round so drift on a
// shared VM hits both alike. static-pinned and xdp-drop do not look at the
// checksum: they show what the generator's checksum costs, and the noise.
Json csum(const Options& o)
{
    header("UDP checksum verification: steady state with checksums on vs off (0)");
    Env env({});
    const int rounds = o.quick ? 1 : 3;
    const std::vector<std::string> kinds{"npf", "static-pinned", "xdp-drop", "recvmmsg"};
    auto rx = rxFor(env, o, o.payload);
    RunSpec spec{.sender = o.sender, .seconds = o.seconds};
    std::map<std::string, std::vector<RunResult>> on, off;
    std::vector<RunResult> all;
    for (int round = 0; round < rounds && !g_interrupted; round++)
        for (auto& k : kinds) {
            if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), k) == o.only.end())
                continue;
            for (bool c : round % 2 ? std::vector<bool>{true, false} : std::vector<bool>{false, true}) {
                Options oc = o;
                oc.udpCsum = c;
                for (auto& r : runAll({k}, spec, trafficFor(env, oc, 0, o.payload), rx, oc)) {
                    (c ? on : off)[k].push_back(r);
                    all.push_back(r);
                }
            }
        }
    printf("%-15s %5s %9s %9s %9s %6s %9s %8s %9s\n", "contender", "csum", "offered", "recv", "steady", "bad",
           "csumErr", "cpu ns/p", "lat p50");
    for (auto& r : all) {
        if (!r.error.empty() && r.received == 0) {
            printf("%-15s %5s ERROR %s\n", r.kind.c_str(), r.udpCsum ? "on" : "off", r.error.c_str());
            continue;
        }
        printf("%-15s %5s %8.3fM %8.3fM %8.3fM %6llu %9llu %8.0f %7.1fus\n", r.kind.c_str(), r.udpCsum ? "on" : "off",
               r.offeredPps / 1e6, r.pps / 1e6, r.steadyPps / 1e6, (unsigned long long)r.bad,
               (unsigned long long)csumErrors(r), r.cpuNsPerPacket(), r.latency.quantile(0.5) / 1e3);
    }
    printf("medians over %d round(s); on/off = median of the ratios of adjacent runs\n", rounds);
    printf("%-15s %10s %10s %8s %12s %12s %8s\n", "contender", "off Mpps", "on Mpps", "on/off", "off cpu ns/p",
           "on cpu ns/p", "on/off");
    Json summary = Json::array();
    for (auto& k : kinds) {
        const auto &a = off[k], &b = on[k];
        if (a.empty() || b.empty())
            continue;
        std::vector<double> ppsOff, ppsOn, nsOff, nsOn, ppsRatio, nsRatio;
        for (size_t i = 0; i < std::min(a.size(), b.size()); i++) {
            ppsOff.push_back(a[i].pps);
            ppsOn.push_back(b[i].pps);
            nsOff.push_back(a[i].cpuNsPerPacket());
            nsOn.push_back(b[i].cpuNsPerPacket());
            if (a[i].pps > 0)
                ppsRatio.push_back(b[i].pps / a[i].pps);
            if (a[i].cpuNsPerPacket() > 0)
                nsRatio.push_back(b[i].cpuNsPerPacket() / a[i].cpuNsPerPacket());
        }
        printf("%-15s %10.3f %10.3f %7.2fx %12.0f %12.0f %7.2fx\n", k.c_str(), median(ppsOff) / 1e6,
               median(ppsOn) / 1e6, median(ppsRatio), median(nsOff), median(nsOn), median(nsRatio));
        summary.push_back({{"contender", k},
                           {"offPps", ppsOff},
                           {"onPps", ppsOn},
                           {"offCpuNsPerPacket", nsOff},
                           {"onCpuNsPerPacket", nsOn},
                           {"ppsOnOverOff", median(ppsRatio)},
                           {"cpuOnOverOff", median(nsRatio)}});
    }
    return {{"payload", o.payload}, {"rounds", rounds}, {"summary", summary}, {"runs", runsJson(all)}};
}

const std::map<std::string, std::function<Json(const Options&)>>& table()
{
    static const std::map<std::string, std::function<Json(const Options&)>> t{
        {"steady", steady}, {"cold", cold},       {"pressure", pressure},
        {"faultpath", faultpath}, {"stages", stages}, {"scaling", scaling}, {"csum", csum}, {"burst", burst}, {"credits", credits}};
    return t;
}

} // namespace

const std::vector<std::string>& scenarioNames()
{
    static const std::vector<std::string> n{"steady", "cold",    "pressure", "faultpath",
                                            "stages", "scaling", "csum",     "burst", "credits"};
    return n;
}

std::map<std::string, Options::Steady> steadyRuns(const Json& steady)
{
    std::map<std::string, Options::Steady> m;
    for (const auto& r : steady.value("runs", Json::array()))
        if (!r.contains("error"))
            m[r.value("contender", "")] = {r.value("pps", 0.0), r.value("rxCpuNsPerPacket", 0.0)};
    return m;
}

Json runScenario(const std::string& name, const Options& o)
{
    auto it = table().find(name);
    if (it == table().end())
        throw std::invalid_argument("unknown scenario '" + name + "'");
    return it->second(o);
}

} // namespace npf::bench
