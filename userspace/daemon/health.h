// npfd's probes, /healthz and /readyz (docs/cli.md, "npfd"), served by
// `--health ADDR:PORT` and beside /metrics by `--metrics ADDR:PORT`.
//
// /healthz -- alive: every loop of npfd has made progress within the stall
// limit (stall_detector.h): the control loop (accept, every client's
// requests; it beats once per round and per request) and each interface's
// workers and pagers (the dataplane: a stuck pager leaves clients' threads
// waiting on their page faults). 503 names the loops that are stuck: what
// a restart cures. Not a readiness matter (a deleted interface, a detached
// program): those are /readyz's, and restarting npfd does not cure them.
//
// /readyz -- serving: npfd is alive, started (every interface attached and
// its sockets bound; the client socket listens) and not stopping, and
// nothing has undone that since: every interface is still there with
// npfd's program attached, the socket file is still npfd's. 503 says
// which part is not.
//
// Both answer from the probe's thread without the control loop's lock, so
// a stuck control loop cannot hold up its own diagnosis.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/metrics_server.h"
#include "daemon/stall_detector.h"
#include "sys/round_counter.h"

namespace npf::daemon {

class Health {
public:
    enum class Phase { Starting, Serving, Stopping };

    // What the probes ask npfd, on their threads, only while it is Serving
    // (its interfaces exist from then on until the probes' servers stop).
    struct Source {
        std::function<std::vector<LoopProgress>()> dataplaneLoops; // every interface's workers and pagers
        std::function<std::vector<std::string>()> notServed;       // what is not served, and why
        std::function<std::string()> describe;                     // "eth0 on /run/npf/npfd.sock"
    };

    Health(std::chrono::milliseconds stallLimit, Source source);

    // Async-signal-safe (an atomic store): stop() calls it from SIGTERM's handler.
    void setPhase(Phase p) noexcept { phase_.store(p, std::memory_order_release); }
    // The control loop: once per round and per request handled.
    void beat() noexcept { beats_.bump(); }

    HttpPage healthz();
    HttpPage readyz();
    // GET /healthz and /readyz, for a MetricsServer.
    std::vector<HttpRoute> routes();

private:
    // "" when alive, else which loops are stuck.
    std::string stalled();

    std::atomic<Phase> phase_{Phase::Starting};
    RoundCounter beats_;
    Source source_;
    std::mutex mu_; // the probes of both servers
    StallDetector detector_;
};

} // namespace npf::daemon
