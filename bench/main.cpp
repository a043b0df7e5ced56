// npf-bench: npf side by side with the alternatives (static pinning, AF_XDP,
// recvmmsg, io_uring, drop-on-fault, blocking) on a veth pair between two
// fresh namespaces, with an XDP live-frames generator (sendmmsg where the
// kernel refuses live frames). Human tables on stdout, JSON and plots in
// --out.
#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/version.h"
#include "generator.h"
#include "npf/page_rates.h"
#include "plots.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "sys/log.h"

namespace {

using npf::bench::Json;

void onSignal(int) { npf::bench::g_interrupted.store(true); }

Json machine()
{
    utsname u;
    uname(&u);
    return {{"kernel", std::string(u.release)},
            {"cpus", std::thread::hardware_concurrency()},
            {"cpuModel", npf::bench::procField("/proc/cpuinfo", "model name")},
            {"memTotal", npf::bench::procField("/proc/meminfo", "MemTotal")},
            {"link", "veth pair between two network namespaces, AF_XDP copy mode, native XDP"}};
}

uint64_t parseSize(const std::string& s)
{
    size_t pos = 0;
    uint64_t v = std::stoull(s, &pos);
    std::string u = s.substr(pos);
    if (u == "K" || u == "k")
        return v << 10;
    if (u == "M" || u == "m")
        return v << 20;
    if (u == "G" || u == "g")
        return v << 30;
    if (!u.empty())
        throw std::invalid_argument("unknown size unit in '" + s + "' (use K, M or G)");
    return v;
}

// The rates of page allocation now, on the first receive CPU (where npf's pager and
// the application run): printed and returned for the JSON.
npf::PageRates pageRates(const npf::bench::Options& o, const char* when)
{
    npf::PageRates r = npf::measurePageRates(64ull << 20, o.rxCpus.front());
    printf("page allocation %s, CPU %d, %llu pages: %s\n", when, r.cpu, (unsigned long long)r.pages, r.line().c_str());
    return r;
}

// The scenarios in `list`, the steady state first if it is there: the
// others check their control (static-pinned) against its steady state.
Json runScenarios(std::vector<std::string> list, npf::bench::Options& o)
{
    std::stable_partition(list.begin(), list.end(), [](const std::string& s) { return s == "steady"; });
    Json sc = Json::object();
    for (auto& s : list) {
        if (npf::bench::g_interrupted)
            break;
        sc[s] = npf::bench::runScenario(s, o);
        if (s == "steady")
            o.steady = npf::bench::steadyRuns(sc[s]);
        fflush(stdout);
    }
    return sc;
}

// Command-line values that are not Options fields as they are.
struct Args {
    npf::bench::Options o;
    std::string region = "64M", scenarios, json, udpCsum = "on", releaseMin = "0";
    bool printJson = false, noPlots = false;
    int verbose = 0;
};

void addOptions(CLI::App& app, Args& a)
{
    npf::bench::Options& o = a.o;
    app.add_flag("--quick", o.quick, "short runs of every scenario (< 60 s, for CI)");
    app.add_option("-s,--scenario", a.scenarios,
                   "comma-separated: steady,cold,pressure,faultpath,stages,scaling,csum,burst,credits (default all; steady "
                   "runs first)");
    app.add_option("-c,--contenders", o.only, "run only these contenders, in this order (npf, npf-reserve, npf-pool, npf-memfd, npf-2m, "
                                              "npf-2m-hugetlbfs, npf-rtc, npf-2m-rtc, npf-sidecar, npf-sidecar-2m, npf-sidecar-brokered, "
                                              "npf-sidecar-brokered-2m, npf-sidecar-own, npf-noprefetch, drop-on-fault, blocking, static-pinned, xdp-drop, "
                                              "recvmmsg, io_uring; burst: npf, npf-reserve, npf-2m, npf-2m-noreserve, npfd, npfd-brokered; credits: "
                                              "npf, npf-jumbo, npf-2m, npfd, npfd-2m, npfd-brokered)")
        ->delimiter(',');
    app.add_option("-d,--duration", o.seconds, "seconds of traffic per contender")->check(CLI::Range(0.05, 60.0));
    app.add_option("--cold-rate", o.coldRate, "offered pps in the cold and pressure scenarios")
        ->check(CLI::Range(1000.0, 2.0e7));
    app.add_option("--payload", o.payload, "UDP payload bytes (24 .. 1472)")->check(CLI::Range(24, 1472));
    app.add_option("--region", a.region, "receive region size, e.g. 64M");
    app.add_option("--gen-cpus", o.genCpus, "CPUs of the generator threads (one per entry)");
    app.add_option("--rx-cpus", o.rxCpus, "CPUs of the receiving threads");
    app.add_option("--pagers", o.pagers, "npf contenders' pager threads (pager k on rx-cpus[(n - 1 + k) % n])")
        ->check(CLI::Range(1, 64));
    app.add_option("--flows", o.flows, "source ports the generator cycles through")->check(CLI::Range(1, 1024));
    app.add_option("--sender", o.sender,
                   "traffic source: live (XDP live frames; socket where the kernel refuses them) or socket "
                   "(sendmmsg)")
        ->check(CLI::IsMember({"live", "socket"}));
    app.add_option("--udp-csum", a.udpCsum,
                   "UDP checksums of the generated datagrams: on (correct, verified by npf and the kernel) or off "
                   "(0 = none, nothing to verify); the csum scenario runs both")
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--npfd", o.npfd, "npfd binary the npf-sidecar contender starts (default: the build's)")
        ->check(CLI::ExistingFile);
    app.add_option("--release-min", a.releaseMin,
                   "npf, npf-sidecar: release consumed buffers once this much is consumed, e.g. 1M (default 0: after "
                   "every batch of completions)");
    app.add_option("-o,--out", o.outDir, "directory for JSON, data files and plots");
    app.add_option("--json", a.json, "JSON file (default <out>/npf-bench.json; '-' = stdout only)");
    app.add_flag("--print-json", a.printJson, "also print the JSON on stdout after the tables");
    app.add_flag("--no-plots", a.noPlots, "do not run gnuplot");
    app.add_flag("-v,--verbose", a.verbose, "progress on stderr (-vv: library logs)");
    app.set_version_flag("--version", npf::cli::versionLine("npf-bench"));
}

// The scenarios named in `csv` (all if empty); throws on an unknown one.
std::vector<std::string> scenarioList(const std::string& csv)
{
    const auto& names = npf::bench::scenarioNames();
    if (csv.empty())
        return names;
    std::vector<std::string> list;
    std::stringstream ss(csv);
    for (std::string s; std::getline(ss, s, ',');) {
        if (std::find(names.begin(), names.end(), s) == names.end())
            throw std::invalid_argument("unknown scenario '" + s + "'");
        list.push_back(s);
    }
    return list;
}

// The JSON's machine and config, and the header line.
Json header(const npf::bench::Options& o)
{
    Json out;
    out["tool"] = "npf-bench";
    out["machine"] = machine();
    out["config"] = {{"quick", o.quick},        {"secondsPerContender", o.seconds}, {"coldRatePps", o.coldRate},
                     {"payload", o.payload},    {"regionMiB", o.region >> 20},      {"genCpus", o.genCpus},
                     {"rxCpus", o.rxCpus},      {"flows", o.flows},                 {"sender", o.sender},
                     {"udpCsum", o.udpCsum},    {"releaseMinBytes", o.releaseMin},
                     {"pagers", o.pagers}};
    printf("npf-bench: kernel %s, %u CPUs (%s), generator on CPU(s) %s, receivers on CPU(s) %s, %.2f s per "
           "contender, UDP checksums %s\n",
           out["machine"]["kernel"].get<std::string>().c_str(), std::thread::hardware_concurrency(),
           out["machine"]["cpuModel"].get<std::string>().c_str(), out["config"]["genCpus"].dump().c_str(),
           out["config"]["rxCpus"].dump().c_str(), o.seconds, o.udpCsum ? "on" : "off");
    return out;
}

// The run itself: header, page rates, scenarios, page rates again, plots, JSON.
int run(Args& a, const std::vector<std::string>& list)
{
    npf::bench::Options& o = a.o;
    std::filesystem::create_directories(o.outDir);
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    Json out = header(o);
    const npf::PageRates start = pageRates(o, "now");
    o.installBoundPerSec = start.touchedPerSec;
    printf("(the limits of the fault path on this machine right now; every contender's set-up is done before its "
           "measured window)\n");
    const Json sc = runScenarios(list, o);
    out["pageRates"] = {{"start", nlohmann::ordered_json::parse(npf::toJson(start))},
                        {"end", nlohmann::ordered_json::parse(npf::toJson(pageRates(o, "at the end")))}};
    out["scenarios"] = sc;
    if (!a.noPlots)
        out["plots"] = npf::bench::makePlots(o.outDir, !o.verbose);
    if (npf::bench::g_interrupted)
        out["interrupted"] = true;
    const std::string text = out.dump(2);
    if (a.json != "-") {
        const std::string path = a.json.empty() ? o.outDir + "/npf-bench.json" : a.json;
        std::ofstream(path) << text << "\n";
        printf("\nJSON: %s\n", path.c_str());
    }
    if (a.printJson || a.json == "-")
        printf("%s\n", text.c_str());
    return npf::bench::g_interrupted ? 130 : 0;
}

} // namespace

int main(int argc, char** argv)
{
    Args a;
    CLI::App app{"npf-bench: npf vs static pinning, AF_XDP, recvmmsg, io_uring, drop-on-fault and blocking receivers"};
    addOptions(app, a);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    npf::log::setVerbosity(a.verbose > 1 ? a.verbose - 1 : 0, npf::log::Level::Warn);
    npf::log::routeLibbpf();
    npf::bench::Options& o = a.o;
    o.verbose = a.verbose > 0;
    o.udpCsum = a.udpCsum == "on";
    try {
        o.region = parseSize(a.region);
        o.releaseMin = parseSize(a.releaseMin);
        if (o.region < (8u << 20) || o.region % 4096)
            throw std::invalid_argument("--region must be a multiple of 4 KiB and at least 8M");
        if (o.quick && !app.count("--duration"))
            o.seconds = 0.3;
        const std::vector<std::string> list = scenarioList(a.scenarios);
        if (geteuid() != 0) {
            fprintf(stderr, "npf-bench: needs root (network namespaces, XDP, AF_XDP, userfaultfd)\n");
            return 1;
        }
        if (o.sender == "live") {
            if (const std::string why = npf::bench::liveFramesRefused(); !why.empty()) {
                printf("npf-bench: this kernel refuses XDP live frames (%s): the sender is sendmmsg (--sender "
                       "socket), far slower; rates above what it sends are not measured\n",
                       why.c_str());
                o.sender = "socket";
            }
        }
        return run(a, list);
    } catch (const std::invalid_argument& e) {
        fprintf(stderr, "npf-bench: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        fprintf(stderr, "npf-bench: error: %s\n", e.what());
        return 1;
    }
}
