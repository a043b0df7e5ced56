// npfctl stats [--watch SECS]
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>

#include "cli/exit_codes.h"
#include "cli/json.h"
#include "commands.h"
#include "counters/engine_stats.h"
#include "dataplane/dataplane.h"
#include "dataplane/stats.h"
#include "format.h"
#include "sys/error.h"

namespace npf::cli {
namespace {

volatile sig_atomic_t g_stop = 0;

void onSignal(int) { g_stop = 1; }

// Ctrl-C / SIGTERM end the watch loop cleanly; no SA_RESTART so the sleep wakes up.
void installStopHandlers()
{
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Sleeps until monotonic time `t` or a stop signal.
void sleepUntil(double t)
{
    timespec ts;
    ts.tv_sec = static_cast<time_t>(t);
    ts.tv_nsec = static_cast<long>((t - static_cast<double>(ts.tv_sec)) * 1e9);
    while (!g_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

// All counter groups of an instance: XDP, then the engine's (if one runs).
counters::Counters readCounters(const dataplane::Dataplane& dp)
{
    counters::Counters c = counters::xdpCounters(dataplane::readXdpStats(dp));
    counters::Counters e = counters::engineCounters(dp.ifname());
    c.insert(c.end(), e.begin(), e.end());
    return c;
}

} // namespace

int cmdStats(const Options& opt)
{
    dataplane::Dataplane dp = dataplane::Dataplane::open(opt.ifname);
    const char* mode = dataplane::toString(dp.mode());
    counters::Counters cur = readCounters(dp);
    if (opt.watch <= 0) {
        if (opt.json)
            std::printf("%s\n", statsJson(dp.ifname(), dp.progId(), mode, cur).dump(2).c_str());
        else
            std::printf("%s: %s prog id %u, %s\n%s", dp.ifname().c_str(), NPF_PROG_NAME, dp.progId(), mode,
                        counterTable(cur).c_str());
        return kExitOk;
    }

    installStopHandlers();
    double last = now();
    double next = last + opt.watch;
    for (;;) {
        sleepUntil(next);
        if (g_stop)
            break;
        counters::Counters prev = std::move(cur);
        cur = readCounters(dp);
        double t = now();
        std::vector<double> r = rates(prev, cur, t - last);
        if (opt.json) {
            std::printf("%s\n", statsJson(dp.ifname(), dp.progId(), mode, cur, &r, t - last).dump().c_str());
        } else {
            std::printf("%s: %s prog id %u, %s, last %.1f s\n%s\n", dp.ifname().c_str(), NPF_PROG_NAME,
                        dp.progId(), mode, t - last, counterTable(cur, &r).c_str());
        }
        std::fflush(stdout);
        last = t;
        next += opt.watch;
        if (next < t)
            next = t + opt.watch;
    }
    return kExitOk;
}

} // namespace npf::cli
