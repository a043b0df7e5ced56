// npfd: the npf daemon. Owns the XDP program's dataplane on one or more
// interfaces and serves unprivileged client processes (npf::Client) over a
// Unix socket: each receives into its own pageable region. See README
// "npfd" and docs/protocol.md.
#include <fcntl.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "cli/version.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/memory_limit.h"
#include "npf/log.h"

namespace {

npf::daemon::Daemon* g_daemon = nullptr;

void onSignal(int)
{
    if (g_daemon)
        g_daemon->stop(); // an atomic store and a write(2): async-signal-safe
}

struct Options {
    std::vector<std::string> ifaces;
    std::string config, socket, socketGroup, podsSocket, spillDir, mode = "native", metrics, health, then;
    uint32_t queues = 0, pagers = 1, stallMs = 10000;
    int readyFd = -1;
    bool foreground = false, busyPoll = false, thenExisting = false;
    int verbose = 0;
};

int run(const Options& o)
{
    npf::daemon::DaemonOptions d;
    if (!o.config.empty())
        d.config = npf::daemon::loadConfig(o.config);
    if (!o.ifaces.empty())
        d.config.ifaces = o.ifaces;
    if (!o.socket.empty())
        d.config.socket = o.socket;
    if (!o.socketGroup.empty())
        d.config.socketGroup = o.socketGroup;
    if (!o.podsSocket.empty())
        d.config.podsSocket = o.podsSocket;
    if (!o.spillDir.empty())
        d.config.spillDir = o.spillDir;
    if (o.readyFd >= 0 && ::fcntl(o.readyFd, F_GETFD) < 0)
        throw std::invalid_argument("--ready-fd: " + std::to_string(o.readyFd) + " is not an open file descriptor");
    d.engine.mode = o.mode == "skb" ? npf::XdpMode::Skb : npf::XdpMode::Native;
    d.engine.queues = o.queues;
    d.engine.pagerBusyPoll = o.busyPoll;
    d.engine.pagerThreads = o.pagers;
    d.engine.xdpThenPin = o.then;
    d.engine.xdpThenExisting = o.thenExisting;
    d.metrics = o.metrics;
    d.health = o.health;
    d.stallLimit = std::chrono::milliseconds(o.stallMs);
    const std::string socket = d.config.socket;
    std::string ifaces;
    for (const std::string& i : d.config.ifaces)
        ifaces += (ifaces.empty() ? "" : ",") + i;

    npf::daemon::Daemon daemon(std::move(d));
    g_daemon = &daemon;
    // The ready line: clients may connect from now on.
    std::printf("npfd: serving %s on %s (pid %d)\n", ifaces.c_str(), socket.c_str(), ::getpid());
    std::fflush(stdout);
    if (o.readyFd >= 0) {
        (void)!::write(o.readyFd, "ready\n", 6);
        ::close(o.readyFd);
    }
    // systemd (Type=notify): no-ops unless NOTIFY_SOCKET is set.
    sd_notifyf(0, "READY=1\nSTATUS=serving %s on %s", ifaces.c_str(), socket.c_str());
    const std::string failed = daemon.run();
    sd_notify(0, "STOPPING=1");
    g_daemon = nullptr;
    NPF_INFO("npfd: stopping: disconnecting clients, withdrawing their flows");
    // Not a clean stop: a supervisor (systemd's Restart=on-failure, a
    // container runtime) restarts npfd, which serves the interface again
    // once it is back, or says it is not there.
    return failed.empty() ? 0 : static_cast<int>(npf::cli::kExitNoDevice);
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    CLI::App app{"npfd: the npf daemon -- npf as a service for unprivileged processes (npf::Client)"};
    app.add_option("-i,--iface", o.ifaces,
                   "interface to serve: NAME, or NETNS:NAME in another network namespace (a /run/netns name or a "
                   "path); repeat for more; overrides the config's \"ifaces\"");
    app.add_option("-c,--config", o.config, "config file (JSON: ifaces, socket, clients allow-list; docs/protocol.md)");
    app.add_option("--socket", o.socket, "Unix socket to listen on (default /run/npf/npfd.sock)");
    app.add_option("--socket-group", o.socketGroup, "group of the socket file (mode 0660)");
    app.add_option("--pods-socket", o.podsSocket,
                   "Unix socket (mode 0600) on which npf-cni hands npfd each pod's listener and identity "
                   "(docs/protocol.md, Pods); overrides the config's \"pods_socket\"");
    app.add_option("--spill-dir", o.spillDir, "directory for evicted content (default /var/tmp)");
    app.add_option("--mode", o.mode, "XDP mode if npfd attaches the program")->check(CLI::IsMember({"native", "skb"}));
    auto* then = app.add_option("--then", o.then,
                                "if npfd attaches the program: chain the XDP program pinned at PATH behind it, on "
                                "every interface (it gets every packet npf passes; docs/cli.md, attach)");
    then->type_name("PATH");
    app.add_flag("--then-existing", o.thenExisting,
                 "if npfd attaches the program: take over the XDP program attached to each interface and chain it "
                 "behind npf_xdp (needs CAP_SYS_ADMIN); at exit it takes npf_xdp's place again")
        ->excludes(then);
    app.add_option("--queues", o.queues,
                   "RX queues 0..N-1 to serve on each interface (0 = all the NIC has); each pins 16 MiB at MTU 1500, "
                   "checked against the cgroup's memory limit at start")
        ->check(CLI::Range(0u, static_cast<uint32_t>(NPF_MAX_QUEUES)));
    app.add_option("--metrics", o.metrics,
                   "serve Prometheus metrics over HTTP at ADDR:PORT/metrics, and /healthz and /readyz (e.g. "
                   "127.0.0.1:9100; docs/cli.md)");
    app.add_option("--health", o.health,
                   "serve the probes alone over HTTP at ADDR:PORT: /healthz (alive), /readyz (serving)");
    app.add_option("--health-stall-ms", o.stallMs,
                   "/healthz fails once a loop of npfd (control, worker, pager) made no progress for this long")
        ->check(CLI::Range(100u, 3600000u));
    app.add_option("--pagers", o.pagers, "pager threads per interface (the fault path; docs/architecture.md, Pagers)")
        ->check(CLI::Range(1, 64));
    app.add_flag("--pager-busy-poll", o.busyPoll, "the pagers spin instead of sleeping (give them cores)");
    app.add_flag("--foreground", o.foreground, "stay in the foreground (npfd always does; for init systems)");
    app.add_option("--ready-fd", o.readyFd, "write \"ready\\n\" to this inherited fd once serving, then close it")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()));
    app.add_flag("-v,--verbose", o.verbose, "more log output (repeat for more)");
    app.set_version_flag("--version", npf::cli::versionLine("npfd"));
    app.footer("Clients are allowed by uid/gid (SO_PEERCRED) through the config's \"clients\" rules; root is\n"
               "allowed everything unless \"allow_root\": false. A pod's clients (through the listener npf-cni\n"
               "made in the pod) are allowed by \"pod\" rules and use only the pod's addresses. SIGTERM/SIGINT: every client's flows are\n"
               "withdrawn (their traffic passes to the kernel), then npfd exits; it detaches the XDP\n"
               "program only if it attached it (not if `npfctl attach` did).");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return app.exit(e);
        std::fprintf(stderr, "npfd: error: %s (npfd --help)\n", e.what());
        return npf::cli::kExitUsage;
    }
    npf::log::setVerbosity(o.verbose, npf::log::Level::Info);
    npf::log::routeLibbpf();
    struct sigaction sa{};
    sa.sa_handler = onSignal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return run(o);
    } catch (const npf::daemon::MemoryLimitError& e) {
        std::fprintf(stderr, "npfd: error: %s\n", e.what());
        return npf::cli::kExitMemoryLimit;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "npfd: error: %s\n", e.what());
        return npf::cli::exitCodeFor(e);
    }
}
