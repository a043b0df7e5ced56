// The cold ring as a user meets it (issue 38): netsniff-ng's trafgen sends a
// burst of datagrams flat out from the peer namespace into npf-recv, the
// program a user runs, on a cold region; npf-recv's --json summary accounts
// for every one. Beside each run, the bound of the moment: what a receiver
// could have written if installing the region's pages were its only cost,
// from the machine's page rates measured just before the run. Variants:
// the default route, a reserve, 2 MiB pages (which reserve the region by
// default), 2 MiB pages without a reserve (--reserve 0), and the default
// route through npfd (npf-recv --connect, as a client): npfd in the sidecar
// shape (delegated: npf-recv runs the data path) and brokered (npfd runs it);
// rounds of all of them in turn, so that the machine's drift falls on all.
#include "burst.h"
#include "child.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "npf/abi.h"
#include "npf/page_rates.h"
#include "npfd_process.h"
#include "programs.h"
#include "run.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/fd.h"

#ifndef NPF_RECV_PATH
#define NPF_RECV_PATH ""
#endif

namespace npf::bench {
namespace {

constexpr const char* kTrafgen = "/usr/sbin/trafgen";
constexpr uint32_t kPayload = 1400;  // the datagrams
constexpr uint32_t kBuf = 2048;      // npf-recv's default buffer: two per 4 KiB page
constexpr uint16_t kPort = 9000;
constexpr double kIdleSeconds = 2.0; // npf-recv stops this long after the last datagram

// npf-recv's --reserve: its default (auto: 2 MiB pages reserve the
// region, 4 KiB none), the whole region, or none.
enum class Reserve { Default, Region, None };

struct Variant {
    std::string name;
    bool huge = false;
    Reserve reserve = Reserve::Default;
    bool npfd = false; // npf-recv --connect to an npfd the bench starts (default options: as a user runs it)
    bool delegated = false; // that npfd delegates the interface (the sidecar shape)
};

const std::vector<Variant>& variants()
{
    static const std::vector<Variant> v{{"npf", false, Reserve::Default},    {"npf-reserve", false, Reserve::Region},
                                        {"npf-2m", true, Reserve::Default},  {"npf-2m-noreserve", true, Reserve::None},
                                        {"npfd", false, Reserve::Default, true, true},
                                        {"npfd-brokered", false, Reserve::Default, true, false}};
    return v;
}


struct BurstRun {
    std::string variant, route, error;
    bool generatorFailed = false; // trafgen, not npf-recv: the run is made again, once
    uint32_t retries = 0;
    uint64_t reached = 0, written = 0, droppedInXdp = 0, lost = 0, otherwise = 0;
    double sendSeconds = 0, bound = 0, faultP50Us = 0;
    PageRates rates;
    Json summary;

    double offeredPps() const { return sendSeconds > 0 ? double(reached) / sendSeconds : 0; }
    double pct(double x) const { return reached ? 100.0 * x / double(reached) : 0; }
    Json toJson() const
    {
        Json j{{"variant", variant},          {"route", route},
               {"reached", reached},          {"written", written},
               {"droppedInXdp", droppedInXdp}, {"lost", lost},
               {"otherwiseNotWritten", otherwise}, {"sendSeconds", sendSeconds},
               {"offeredMpps", offeredPps() / 1e6}, {"bound", bound},
               {"writtenOverBound", bound > 0 ? double(written) / bound : 0},
               {"faultP50Us", faultP50Us},   {"pageRates", Json::parse(npf::toJson(rates))}, {"retries", retries},
               {"summary", summary}};
        if (!error.empty())
            j["error"] = error;
        return j;
    }
};

std::string trafgenConfig(const TrafficConfig& t, const std::string& dir)
{
    const std::string path = dir + "/trafgen.cfg";
    std::ofstream f(path);
    f << "{ eth(da=" << t.dstMac << ", sa=" << t.srcMac << "), ipv4(saddr=" << t.srcAddr << ", daddr=" << t.dstAddr
      << ", ttl=64), udp(sp=40000, dp=" << kPort << "), fill(0x41, " << kPayload << ") }\n";
    if (!f)
        throwErrno(EIO, "write " + path);
    return path;
}

BurstRun runBurst(const Variant& v, const TrafficConfig& t, const RxConfig& rx, uint64_t datagrams, uint64_t region,
                  const std::string& dir, int cpu, const std::string& tag)
{
    BurstRun r;
    r.variant = v.name;
    r.rates = measurePageRates(16ull << 20, cpu);
    std::vector<std::string> args = {programPath(NPF_RECV_PATH, "npf-recv"), rx.ifname, std::to_string(kPort), "--cold", "--region",
                                     std::to_string(region >> 20) + "M", "--idle", std::to_string(kIdleSeconds),
                                     "--json", "-o", "/dev/null", "--ready-fd", std::to_string(kReadyFd)};
    if (v.huge)
        args.insert(args.end(), {"--page-size", "2M"});
    if (v.reserve != Reserve::Default)
        args.insert(args.end(), {"--reserve", v.reserve == Reserve::None ? "0" : std::to_string(region >> 20) + "M"});
    std::optional<NpfdProcess> npfd; // stopped (SIGTERM) after npf-recv, before the next run
    if (v.npfd) {
        const std::string npfdDir = dir + "/npfd-" + tag;
        std::filesystem::create_directories(npfdDir);
        npfd.emplace(rx, npfdDir, false, v.delegated);
        args.insert(args.end(),
                    {"--connect", npfd->socket(), "--client-mode", v.delegated ? "delegated" : "brokered"});
    }
    const std::string log = dir + "/npf-recv-" + tag + ".log", genLog = dir + "/trafgen-" + tag + ".log";
    Child recv(args, log, true);
    if (!recv.ready(60)) {
        r.error = "npf-recv was not ready within 60 s: " + readFile(log);
        return r;
    }
    const std::string cfg = trafgenConfig(t, dir);
    const uint64_t t0 = monotonicNs();
    Child gen({"/usr/bin/nsenter", "--net=" + t.txNsPath, kTrafgen, "--cpus", "1", "-o", t.txIf, "-i", cfg, "-n",
               std::to_string(datagrams), "-q"},
              genLog, false);
    const int gst = gen.wait(120);
    r.sendSeconds = double(monotonicNs() - t0) * 1e-9;
    const int st = recv.wait(60);
    if (gst != 0 || st != 0) {
        r.generatorFailed = gst != 0;
        r.error = "trafgen exited " + std::to_string(gst) + " (" + genLog + "), npf-recv " + std::to_string(st) +
                  " (" + log + ")";
        return r;
    }
    r.summary = summaryOf(readFile(log));
    if (!r.summary.is_object()) {
        r.error = "no JSON summary from npf-recv: " + readFile(log);
        return r;
    }
    const Json& s = r.summary;
    r.reached = at(s, {"reached"});
    r.written = at(s, {"datagrams"});
    r.droppedInXdp = at(s, {"not_written", "dropped_in_xdp"});
    r.lost = at(s, {"not_written", "lost"});
    r.otherwise = r.reached - std::min(r.reached, r.written + r.droppedInXdp + r.lost);
    r.route = s.contains("engine") && s["engine"].contains("route") ? s["engine"]["route"].get<std::string>() : "";
    r.faultP50Us = double(at(s, {"engine", "latency", "fault_total", "p50_ns"})) / 1e3;
    const uint64_t page = v.huge ? 2ull << 20 : 4096, perPage = page / kBuf;
    const uint64_t pages = std::min(region / page, (r.reached + perPage - 1) / perPage);
    // What npf-recv reserved (its default depends on the page size): from its summary.
    const bool reserved = at(s, {"reserve_bytes"}) > 0;
    r.bound = boundOfTheMoment(r.reached, r.sendSeconds, pages, installSeconds(r.rates, page, reserved), uint32_t(perPage));
    return r;
}

void printRun(const BurstRun& r)
{
    if (!r.error.empty()) {
        printf("%-16s error: %s\n", r.variant.c_str(), r.error.c_str());
        return;
    }
    // Through npfd the fault path is npfd's: the client's summary has no fault latency ("-").
    char faultP50[16] = "-";
    if (r.faultP50Us > 0)
        snprintf(faultP50, sizeof faultP50, "%.0f", r.faultP50Us);
    printf("%-16s %-15s %8.3f %9llu %8.1f%% %8.1f%% %8.1f%% %7.2f %9s %8.3f %8.3f\n", r.variant.c_str(),
           r.route.c_str(), r.offeredPps() / 1e6, (unsigned long long)r.reached, r.pct(double(r.written)),
           r.pct(double(r.droppedInXdp)), r.pct(r.bound), r.bound > 0 ? double(r.written) / r.bound : 0,
           faultP50, r.rates.copiedPerSec / 1e6, r.rates.recycledPerSec / 1e6);
}

} // namespace

Json burst(const Options& o)
{
    printf("\n== burst: trafgen into npf-recv --cold, every datagram accounted ==\n");
    if (::access(kTrafgen, X_OK) != 0) {
        printf("skipped: %s missing (netsniff-ng; scripts/deps.sh installs it)\n", kTrafgen);
        return {{"skipped", std::string(kTrafgen) + " missing"}};
    }
    const uint64_t datagrams = o.quick ? 100000 : 1000000, region = o.quick ? 64ull << 20 : 256ull << 20;
    const uint32_t rounds = o.quick ? 1 : 3;
    std::vector<Variant> vs;
    for (const Variant& v : variants())
        if (o.only.empty() || std::find(o.only.begin(), o.only.end(), v.name) != o.only.end())
            vs.push_back(v);
    printf("%llu datagrams of %u B, a %llu MiB region, %u round(s) of %zu variant(s); bound: what the page rates "
           "of the moment allow (docs/BENCHMARKS.md)\n",
           (unsigned long long)datagrams, kPayload, (unsigned long long)(region >> 20), rounds, vs.size());
    printf("%-16s %-15s %8s %9s %9s %9s %9s %7s %9s %8s %8s\n", "variant", "route", "offer M/s", "reached", "written",
           "xdp drop", "bound", "w/bound", "fault p50", "copy M", "recyc M");
    std::error_code ec;
    const std::string dir = o.outDir + "/burst";
    std::filesystem::create_directories(dir, ec);
    Env env({});
    TrafficConfig t = env.traffic();
    RxConfig rx = env.rx();
    Json runs = Json::array();
    std::map<std::string, std::vector<double>> ratio;
    std::map<uint32_t, std::map<std::string, uint64_t>> written; // by round, by variant
    for (uint32_t round = 0; round < rounds && !g_interrupted; round++)
        for (const Variant& v : vs) {
            if (g_interrupted)
                break;
            const std::string tag = v.name + "-" + std::to_string(round);
            BurstRun r = runBurst(v, t, rx, datagrams, region, dir, o.rxCpus.front(), tag);
            if (r.generatorFailed && !g_interrupted) { // trafgen's failure, not the receiver's: once more
                printf("%-16s trafgen failed (%s): once more\n", v.name.c_str(), r.error.c_str());
                r = runBurst(v, t, rx, datagrams, region, dir, o.rxCpus.front(), tag + "-again");
                r.retries = 1;
            }
            printRun(r);
            fflush(stdout);
            if (r.error.empty() && r.bound > 0)
                ratio[v.name].push_back(double(r.written) / r.bound);
            if (r.error.empty())
                written[round][v.name] = r.written;
            runs.push_back(r.toJson());
        }
    Json summary = Json::object();
    // Through npfd against in process, the same round: what the process
    // boundary costs a burst, delegated (the sidecar shape) and brokered.
    for (const auto& [variant, key] : {std::pair{"npfd", "npfdOverNpfWritten"}, {"npfd-brokered", "brokeredOverNpfWritten"}}) {
        std::vector<double> via;
        for (auto& [round, w] : written)
            if (w.count("npf") && w.count(variant) && w["npf"] > 0)
                via.push_back(double(w[variant]) / double(w["npf"]));
        if (via.empty())
            continue;
        std::sort(via.begin(), via.end());
        summary[key] = {{"min", via.front()}, {"median", via[via.size() / 2]}};
        printf("%-13s / npf written: min %.2f, median %.2f over %zu round(s)\n", variant, via.front(),
               via[via.size() / 2], via.size());
    }
    for (auto& [name, xs] : ratio) {
        std::sort(xs.begin(), xs.end());
        summary[name] = {{"writtenOverBoundMin", xs.front()}, {"writtenOverBoundMedian", xs[xs.size() / 2]}};
        printf("%-16s written / bound: min %.2f, median %.2f over %zu run(s)\n", name.c_str(), xs.front(),
               xs[xs.size() / 2], xs.size());
    }
    return {{"datagrams", datagrams}, {"payload", kPayload}, {"regionBytes", region}, {"rounds", rounds},
            {"summary", summary}, {"runs", runs}};
}

} // namespace npf::bench
