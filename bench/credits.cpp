// Credits (issue 37): npf-send into npf-recv on a cold region, with the
// receiver's credits and without, as a user runs them. Per variant and round:
//   plain    npf-send --plain flat out into npf-recv (no credits): today's loss
//   credits  npf-recv --credits, npf-send honouring them: loss and goodput
//   best     the highest rate a plain sender keeps at <= 0.1 % loss into the
//            same receiver (a search over paced runs, from the plain run's rate
//            down): the goodput credits are held to (>= 0.9x of it)
// A round runs plain, credits, plain (odd rounds credits, plain, credits) and
// counts a kind's two runs as one, so that a drift over the round falls on
// both kinds alike; each run waits kSettle first. Every run is a fresh
// npf-recv on a cold region that one run's datagrams fill once (every page
// faults once: no lap over pages already resident). Goodput: datagrams
// written over the sender's time.
#include "credits.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "child.h"
#include "npfd_process.h"
#include "programs.h"
#include "run.h"
#include "sys/clock.h"

#ifndef NPF_RECV_PATH
#define NPF_RECV_PATH ""
#endif
#ifndef NPF_SEND_PATH
#define NPF_SEND_PATH ""
#endif

namespace npf::bench {
namespace {

constexpr uint16_t kPort = 9000;
constexpr double kLossTarget = 0.001; // the issue's 0.1 %
// Waited before each run: free page reporting hands what the last run freed
// back to the host about 2 s later, after which its pages are as slow to get
// as fresh ones. So every run starts from the same allocator, cold, not from
// the last run's huge pages (docs/BENCHMARKS.md, "Credits").
constexpr auto kSettle = std::chrono::seconds(5);

// Datagrams and buffers: 1400 B into npf-recv's default 2048-byte buffers
// (MTU 1500), or jumbo: 8972 B (the most MTU 9000 carries) into 9 KiB ones,
// 2.25 pages of 4 KiB each, the most a sender here offers the fault path.
struct Shape {
    uint32_t mtu, payload, buf;
};
constexpr Shape kStandard{1500, 1400, 2048}, kJumbo{9000, 8972, 9216};

struct Variant {
    std::string name;
    bool huge = false;      // 2 MiB pages, no reserve: a fresh huge page per fault
    bool npfd = false;      // npf-recv --connect to an npfd the bench starts
    bool delegated = false; // that npfd delegates the interface (the sidecar shape)
    Shape shape = kStandard;
};

const std::vector<Variant>& variants()
{
    static const std::vector<Variant> v{{"npf", false},
                                        {"npf-jumbo", false, false, false, kJumbo},
                                        {"npf-2m", true},
                                        {"npfd", false, true, true},
                                        {"npfd-2m", true, true, true},
                                        {"npfd-brokered", false, true, false}};
    return v;
}

struct Run {
    std::string error, route;
    uint64_t sent = 0, reached = 0, written = 0, dropRnr = 0, lost = 0;
    uint64_t creditsSent = 0, creditWaits = 0, throttled = 0;
    double seconds = 0, offered = 0;
    double loss() const { return sent ? 1.0 - double(written) / double(sent) : 1.0; }
    // Several runs as one: their counts summed, over their summed time.
    void add(const Run& o)
    {
        if (error.empty())
            error = o.error;
        if (route.empty())
            route = o.route;
        sent += o.sent, reached += o.reached, written += o.written, dropRnr += o.dropRnr, lost += o.lost;
        creditsSent += o.creditsSent, creditWaits += o.creditWaits, throttled += o.throttled;
        seconds += o.seconds;
        offered = seconds > 0 ? double(sent) / seconds : 0;
    }
    double goodput() const { return seconds > 0 ? double(written) / seconds : 0; }
    Json toJson() const
    {
        Json j{{"sent", sent},           {"reached", reached},       {"written", written},
               {"dropRnr", dropRnr},     {"lost", lost},             {"loss", loss()},
               {"seconds", seconds},     {"offeredPps", offered},    {"goodputPps", goodput()},
               {"creditsSent", creditsSent}, {"creditWaits", creditWaits}, {"senderThrottled", throttled},
               {"route", route}};
        if (!error.empty())
            j["error"] = error;
        return j;
    }
};

// "0,1": taskset's list.
std::string cpuList(const std::vector<int>& cpus)
{
    std::string s;
    for (int c : cpus)
        s += (s.empty() ? "" : ",") + std::to_string(c);
    return s;
}

// One run: a fresh npf-recv (and npfd) on a cold region, npf-send of n
// datagrams from the peer namespace; credits on both sides or neither;
// rate 0 = flat out.
Run runOnce(const Variant& v, const TrafficConfig& t, const RxConfig& rx, uint64_t n, uint64_t region, bool credits,
            double rate, const std::string& dir, const std::string& tag)
{
    Run r;
    std::this_thread::sleep_for(kSettle);
    // npf-recv on the receivers' CPUs, npf-send on the generator's (with
    // the XDP program and the AF_XDP copy: veth runs them in its softirq).
    std::vector<std::string> args = {"/usr/bin/taskset", "-c", cpuList(rx.cpus),
                                     programPath(NPF_RECV_PATH, "npf-recv"), rx.ifname, std::to_string(kPort),
                                     "--cold", "--region", std::to_string(region >> 20) + "M", "--idle", "1",
                                     "--buf-size", std::to_string(v.shape.buf), "--json", "-o", "/dev/null",
                                     "--ready-fd", std::to_string(kReadyFd)};
    if (v.huge)
        args.insert(args.end(), {"--page-size", "2M", "--reserve", "0"});
    if (credits)
        args.push_back("--credits");
    std::optional<NpfdProcess> npfd;
    if (v.npfd) {
        const std::string npfdDir = dir + "/npfd-" + tag;
        std::filesystem::create_directories(npfdDir);
        npfd.emplace(rx, npfdDir, false, v.delegated);
        npfd->confine(rx.cpus); // as npf-recv is (taskset)
        args.insert(args.end(), {"--connect", npfd->socket(), "--client-mode", v.delegated ? "delegated" : "brokered"});
    }
    const std::string log = dir + "/npf-recv-" + tag + ".log", sendLog = dir + "/npf-send-" + tag + ".log";
    Child recv(args, log, true);
    if (!recv.ready(60)) {
        r.error = "npf-recv was not ready within 60 s: " + readFile(log);
        return r;
    }
    std::vector<std::string> send = {"/usr/bin/taskset", "-c", cpuList(t.cpus), "/usr/bin/nsenter",
                                     "--net=" + t.txNsPath, programPath(NPF_SEND_PATH, "npf-send"),
                                     t.dstAddr, std::to_string(kPort), "-n", std::to_string(n), "-s",
                                     std::to_string(v.shape.payload), "--json", "--timeout-ms", "5000"};
    if (!credits)
        send.push_back("--plain");
    if (rate > 0)
        send.insert(send.end(), {"--rate", std::to_string(uint64_t(rate))});
    Child sender(send, sendLog, false);
    const int sst = sender.wait(120), st = recv.wait(60);
    const Json ss = summaryOf(readFile(sendLog)), rs = summaryOf(readFile(log));
    if (sst != 0 || st != 0 || !ss.is_object() || !rs.is_object()) {
        r.error = "npf-send exited " + std::to_string(sst) + " (" + sendLog + "), npf-recv " + std::to_string(st) +
                  " (" + log + ")";
        return r;
    }
    r.sent = at(ss, {"sent"});
    r.seconds = ss.value("seconds", 0.0);
    r.offered = r.seconds > 0 ? double(r.sent) / r.seconds : 0;
    r.throttled = at(ss, {"throttled"});
    r.reached = at(rs, {"reached"});
    r.written = at(rs, {"datagrams"});
    r.dropRnr = at(rs, {"flow", "xdp", "drop_rnr"});
    r.lost = at(rs, {"not_written", "lost"});
    r.creditsSent = at(rs, {"flow", "credits_sent"});
    r.creditWaits = at(rs, {"flow", "credit_waits"});
    r.route = rs.contains("engine") && rs["engine"].contains("route") ? rs["engine"]["route"].get<std::string>() : "";
    return r;
}

void printRun(const std::string& variant, const char* what, const Run& r)
{
    if (!r.error.empty()) {
        printf("%-14s %-8s error: %s\n", variant.c_str(), what, r.error.c_str());
        return;
    }
    printf("%-14s %-8s %-15s %9.3f %9llu %9llu %8.3f%% %9llu %9.3f %8llu %8llu\n", variant.c_str(), what,
           r.route.c_str(), r.offered / 1e6, (unsigned long long)r.sent, (unsigned long long)r.written,
           100 * r.loss(), (unsigned long long)r.dropRnr, r.goodput() / 1e6, (unsigned long long)r.creditsSent,
           (unsigned long long)r.throttled);
    fflush(stdout);
}

} // namespace

Json credits(const Options& o)
{
    printf("\n== credits: npf-send into npf-recv --cold, with the receiver's credits and without ==\n");
    // One lap of the region: each page written once.
    const uint64_t region = o.quick ? 64ull << 20 : 256ull << 20;
    const uint32_t rounds = o.quick ? 1 : 3, searchSteps = o.quick ? 2 : 4;
    std::vector<Variant> vs;
    for (const Variant& v : variants())
        if (o.only.empty() || std::find(o.only.begin(), o.only.end(), v.name) != o.only.end())
            vs.push_back(v);
    printf("a cold %llu MiB region filled once per run (1400 B datagrams into 2048-byte buffers; jumbo: 8972 B on "
           "MTU 9000 into 9216-byte ones), %u round(s) of plain / credits / plain (odd rounds: credits / plain / "
           "credits; a variant's two runs of a kind count as one), each run after %llu s for the host to take back "
           "what the last one freed; best: the highest plain rate at <= 0.1 %% loss (%u halvings)\n",
           (unsigned long long)(region >> 20), rounds, (unsigned long long)kSettle.count(), searchSteps);
    printf("%-14s %-8s %-15s %9s %9s %9s %9s %9s %9s %8s %8s\n", "variant", "run", "route", "offer M/s", "sent",
           "written", "loss", "drop_rnr", "good M/s", "credits", "throttl");
    const std::string dir = o.outDir + "/credits";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    Json runs = Json::array();
    for (uint32_t round = 0; round < rounds && !g_interrupted; round++)
        for (const Variant& v : vs) {
            if (g_interrupted)
                break;
            // A veth pair of the variant's MTU (this thread in its rx namespace
            // until the next).
            topology::VethOptions vo;
            vo.mtu = int(v.shape.mtu);
            Env env(vo);
            TrafficConfig t = env.traffic();
            t.cpus = o.genCpus;
            RxConfig rx = env.rx();
            rx.cpus = o.rxCpus;
            const uint64_t n = region / v.shape.buf;
            const std::string tag = v.name + "-" + std::to_string(round);
            // Three runs, the kind in the middle once, the other twice around
            // it: what a run leaves the page allocator (freed pages the next
            // one recycles) falls on both kinds alike.
            Run plain, cred, bestSingle;
            Json each = Json::array();
            for (int k = 0; k < 3; k++) {
                const bool isPlain = (k % 2 == 0) == (round % 2 == 0);
                const std::string what = isPlain ? "plain" : "credits";
                const Run r = runOnce(v, t, rx, n, region, !isPlain, 0, dir, tag + "-" + what + std::to_string(k));
                printRun(v.name, what.c_str(), r);
                (isPlain ? plain : cred).add(r);
                if (isPlain && r.error.empty() && r.loss() <= kLossTarget && r.goodput() > bestSingle.goodput())
                    bestSingle = r;
                Json rj = r.toJson();
                rj["kind"] = what;
                each.push_back(rj);
            }
            // The best plain rate at <= 0.1 % loss: flat out if that holds
            // (the two runs together), else the better of a flat-out run that
            // held it alone and a search halving from the flat-out rate, then
            // back up by half the step.
            Run best = plain;
            if (plain.error.empty() && plain.loss() > kLossTarget) {
                double lo = 0, hi = plain.offered;
                best = bestSingle;
                for (uint32_t s = 0; s < searchSteps && !g_interrupted; s++) {
                    const double rate = lo > 0 ? (lo + hi) / 2 : hi / 2;
                    Run r = runOnce(v, t, rx, n, region, false, rate, dir, tag + "-rate" + std::to_string(s));
                    printRun(v.name, ("@" + std::to_string(int(rate / 1000)) + "k").c_str(), r);
                    if (!r.error.empty())
                        break;
                    if (r.loss() <= kLossTarget) {
                        lo = rate;
                        if (r.goodput() > best.goodput())
                            best = r;
                    } else {
                        hi = rate;
                    }
                }
            }
            Json j{{"variant", v.name},          {"round", round},           {"datagrams", n},
                   {"payload", v.shape.payload}, {"mtu", v.shape.mtu},       {"runs", each},
                   {"plain", plain.toJson()},    {"credits", cred.toJson()}, {"best", best.toJson()}};
            if (cred.error.empty() && best.goodput() > 0) {
                const double ratio = cred.goodput() / best.goodput();
                j["creditsOverBest"] = ratio;
                printf("%-14s credits: loss %.3f %% (target <= 0.1 %%), goodput %.3f M/s = %.2fx the best lossless "
                       "plain %.3f M/s (target >= 0.9x); plain flat out lost %.2f %%\n",
                       v.name.c_str(), 100 * cred.loss(), cred.goodput() / 1e6, ratio, best.goodput() / 1e6,
                       100 * plain.loss());
            }
            runs.push_back(j);
        }
    return {{"regionBytes", region}, {"rounds", rounds}, {"runs", runs}};
}

} // namespace npf::bench
