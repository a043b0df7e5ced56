#include "run.h"

#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <thread>

namespace npf::bench {

std::atomic<bool> g_interrupted{false};

Env::Env(topology::VethOptions opt) : veth_(opt), guard_(veth_.rxNs()) {}

TrafficConfig Env::traffic() const
{
    TrafficConfig t;
    t.txNsPath = veth_.txNs().path();
    t.txIf = veth_.txIf();
    t.srcMac = veth_.txMac();
    t.dstMac = veth_.rxMac();
    t.srcAddr = veth_.txAddr();
    t.dstAddr = veth_.rxAddr();
    return t;
}

RxConfig Env::rx() const
{
    RxConfig r;
    r.ifname = veth_.rxIf();
    r.addr = veth_.rxAddr();
    return r;
}

namespace {

// CPU seconds and minor page faults of this process (every thread) so far.
struct Usage {
    double cpu = 0;
    uint64_t minorFaults = 0;
};

Usage processUsage()
{
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return {double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6,
            uint64_t(ru.ru_minflt)};
}

// Received + reported lost so far, over all meters.
uint64_t seen(const std::vector<std::unique_ptr<Meter>>& meters)
{
    uint64_t n = 0;
    for (auto& m : meters)
        n += m->packets() + m->lostReported();
    return n;
}

// A region counter of a contender's details ("region", else "counters"); 0 if absent.
uint64_t regionCounter(const nlohmann::json& d, const char* key)
{
    for (const char* group : {"region", "counters"})
        if (d.is_object() && d.contains(group) && d[group].contains(key) && d[group][key].is_number_unsigned())
            return d[group][key].get<uint64_t>();
    return 0;
}

PoolWindow poolWindow(const nlohmann::json& before, const nlohmann::json& after)
{
    auto delta = [&](const char* key) {
        const uint64_t a = regionCounter(after, key), b = regionCounter(before, key);
        return a > b ? a - b : 0;
    };
    return {delta("pool_installs"), delta("pool_empty"), delta("pool_refills"), delta("pool_returns"),
            delta("pool_full")};
}

// The measured window: the receiver's threads start, the sender sends for
// spec.seconds, the receiver drains (until nothing arrives for 20 ms, at most
// drainSeconds) and stops. Fills the window's time, CPU and faults into r.
void window(const RunSpec& spec, Receiver& rx, Sender& gen, const std::vector<std::unique_ptr<Meter>>& meters,
            RunResult& r)
{
    std::vector<Meter*> raw;
    for (auto& m : meters)
        raw.push_back(m.get());
    const Usage u0 = processUsage();
    const double helper0 = rx.helperCpuSeconds();
    rx.start(raw);
    gen.start(spec.seconds);
    gen.join();
    const uint64_t tEnd = monotonicNs();
    uint64_t last = UINT64_MAX;
    for (int i = 0; i < int(spec.drainSeconds * 50) + 1; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const uint64_t now = seen(meters);
        if (now == last)
            break;
        last = now;
    }
    rx.stop();
    const Usage u1 = processUsage();
    r.genCpuSeconds = gen.cpuSeconds();
    r.rxCpuSeconds = u1.cpu - u0.cpu + rx.helperCpuSeconds() - helper0 -
                     (gen.separateProcesses() ? 0.0 : r.genCpuSeconds);
    r.windowMinorFaults = u1.minorFaults - u0.minorFaults;
    r.seconds = double(tEnd - meters.front()->t0()) * 1e-9;
}

// Totals, bins and latency of the meters into r.
void collect(const std::vector<std::unique_ptr<Meter>>& meters, RunResult& r)
{
    for (auto& m : meters) {
        r.received += m->packets();
        r.bytes += m->bytes();
        r.bad += m->bad();
        r.lostCompletions += m->lostReported();
        r.latency.merge(m->latency());
        auto b = m->bins();
        if (r.bins.size() < b.size())
            r.bins.resize(b.size());
        for (size_t i = 0; i < b.size(); i++)
            r.bins[i] += b[i];
    }
    r.bins.resize(std::min(r.bins.size(), size_t(r.seconds * 1000)));
    r.offeredPps = double(r.sent) / r.seconds;
    r.pps = double(r.received) / r.seconds;
    // Steady state: the second half of the sending time.
    r.steadyPps = meanBins(r.bins, r.bins.size() / 2, r.bins.size()) * 1000;
}

} // namespace

double meanBins(const std::vector<uint32_t>& bins, size_t from, size_t to)
{
    to = std::min(to, bins.size());
    if (from >= to)
        return 0;
    double s = 0;
    for (size_t i = from; i < to; i++)
        s += bins[i];
    return s / double(to - from);
}

int timeToFraction(const std::vector<uint32_t>& bins, double target, double frac)
{
    for (size_t i = 0; i + 2 < bins.size(); i++)
        if (bins[i] >= frac * target && bins[i + 1] >= frac * target && bins[i + 2] >= frac * target)
            return int(i);
    return -1;
}

RunResult runOne(const RunSpec& spec, const TrafficConfig& traffic, const RxConfig& rxc, bool verbose)
{
    RunResult r;
    r.kind = spec.kind;
    r.udpCsum = traffic.udpCsum;
    if (verbose)
        fprintf(stderr, "npf-bench: %s, %u-byte payloads, UDP checksums %s, %s sender at %s\n", spec.kind.c_str(),
                traffic.payload, traffic.udpCsum ? "on" : "off", spec.sender.c_str(), traffic.pps > 0 ? (std::to_string(uint64_t(traffic.pps)) + " pps").c_str() : "max rate");
    try {
        // The sender first: its processes fork before the receiver's memory exists.
        std::unique_ptr<Sender> gen =
            spec.sender == "socket" ? makeSocketSender(traffic) : makeLiveGenerator(traffic);
        // Set-up (populate, mlock, pool warm-up, huge pages, npfd): before the window.
        const uint64_t s0 = monotonicNs();
        std::unique_ptr<Receiver> rx = makeReceiver(spec.kind, rxc);
        r.setupSeconds = double(monotonicNs() - s0) * 1e-9;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const uint64_t t0 = monotonicNs();
        std::vector<std::unique_ptr<Meter>> meters;
        for (size_t i = 0; i < rx->lanes(); i++)
            meters.push_back(std::make_unique<Meter>(t0, spec.seconds + spec.drainSeconds + 0.1, traffic.payload));
        const nlohmann::json before = rx->details();
        window(spec, *rx, *gen, meters, r);
        r.error = gen->error();
        r.sent = gen->sent();
        collect(meters, r);
        r.pinnedBytes = rx->pinnedBytes();
        r.residentBytes = rx->residentBytes();
        r.details = rx->details();
        r.route = rx->route();
        r.pool = poolWindow(before, r.details);
    } catch (const std::exception& e) {
        r.error = e.what();
        fprintf(stderr, "npf-bench: %s: %s\n", spec.kind.c_str(), e.what());
    }
    return r;
}

nlohmann::ordered_json RunResult::toJson() const
{
    nlohmann::ordered_json j;
    j["contender"] = kind;
    j["route"] = route;
    j["poolInWindow"] = {{"taken", pool.taken},
                         {"fresh", pool.fresh},
                         {"refills", pool.refills},
                         {"returned", pool.returned},
                         {"freed", pool.freed}};
    j["udpCsum"] = udpCsum;
    j["seconds"] = seconds;
    j["sent"] = sent;
    j["received"] = received;
    j["lost"] = lost();
    j["lostCompletions"] = lostCompletions;
    j["badPayloads"] = bad;
    j["offeredPps"] = offeredPps;
    j["pps"] = pps;
    j["steadyPps"] = steadyPps;
    j["gbps"] = double(bytes) * 8 / seconds / 1e9;
    j["rxCpuSeconds"] = rxCpuSeconds;
    j["genCpuSeconds"] = genCpuSeconds;
    j["rxCpuNsPerPacket"] = cpuNsPerPacket();
    j["setupMs"] = setupSeconds * 1e3;
    j["windowMinorFaults"] = windowMinorFaults;
    j["pinnedMiB"] = double(pinnedBytes) / (1 << 20);
    j["residentMiB"] = double(residentBytes) / (1 << 20);
    j["latencyNs"] = {{"count", latency.count()},
                      {"p50", latency.quantile(0.5)},
                      {"p99", latency.quantile(0.99)},
                      {"p999", latency.quantile(0.999)},
                      {"max", latency.max()}};
    j["details"] = details;
    if (!error.empty())
        j["error"] = error;
    return j;
}

} // namespace npf::bench
