// npfd (the real daemon) in the rx namespace of an e2e Rig, with a config in
// a temp dir: clients with uid 65534 may open ports 7400-7499 (all of them
// together: 512 MiB of region, 256 MiB of budget, 4 flows); root may do anything. Clients are
// npf-recv --connect processes run as uid 65534 (setpriv), or npf::Client
// and raw protocol sockets in the test process (root). NpfdOptions changes
// the rules, adds top-level config keys, or wraps npfd's command line.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npf/engine.h"

#include "e2e_rig.h"

namespace npf::e2e {

constexpr uid_t kNobody = 65534;
constexpr uint16_t kFirstPort = 7400;

struct NpfdOptions {
    // Follow `-c CONFIG` on npfd's command line (e.g. --metrics ADDR:PORT,
    // listening in the rx namespace).
    std::vector<std::string> extraArgs;
    // Runs npfd through this command (which must exec it, keeping the pid):
    // e.g. {"prlimit", "--nofile=256:256", "--"}.
    std::vector<std::string> wrapper;
    // More top-level members of the config object, JSON text without the
    // braces, e.g. R"("hello_timeout_ms": 1000)".
    std::string settings;
    // The config's "clients" array (JSON text); empty: the rule above.
    std::string clients;
};

class Npfd {
public:
    // `extraArgs` follow `-c CONFIG` on npfd's command line (e.g. --metrics
    // ADDR:PORT, listening in the rx namespace).
    Npfd(Rig& rig, const TempDir& dir, std::vector<std::string> extraArgs = {});
    Npfd(Rig& rig, const TempDir& dir, NpfdOptions opt);
    ~Npfd(); // SIGTERM, then waits; SIGKILL if it does not exit (at once if stop() timed out)
    void start();                  // (again, after kill())
    void kill(int sig) { child_->kill(sig); }
    // SIGTERM, then its exit status (-1 if it did not exit in time).
    int stop();
    bool wait(int ms, int* status) { return child_->wait(ms, status); }
    bool running() { return child_ && child_->running(); }
    const std::string& socket() const { return socket_; }
    std::string log() const;
    pid_t pid() const { return child_->pid(); }
    // Entries of /proc/PID/fd (0 if npfd is gone).
    size_t openFds() const;
    // VmRSS of /proc/PID/status, KiB (0 if npfd is gone).
    uint64_t rssKiB() const;

private:
    Rig& rig_;
    std::string dir_, config_, socket_, log_;
    NpfdOptions opt_;
    std::unique_ptr<Child> child_;
    bool stopTimedOut_ = false;
};

// npf-recv --connect as uid 65534 in the rx namespace, output to `out`.
std::unique_ptr<Child> startClientRecv(Rig& rig, const Npfd& d, uint16_t port, const std::string& out,
                                       const std::string& err, const std::vector<std::string>& extra);
// The same as uid `uid` (group nogroup, the socket's, so it may connect).
std::unique_ptr<Child> startClientRecvAs(uid_t uid, Rig& rig, const Npfd& d, uint16_t port, const std::string& out,
                                         const std::string& err, const std::vector<std::string>& extra);

// Fills `out` with the flow's completions; returns how many came before the deadline.
size_t awaitCompletions(Flow& f, std::span<npf_completion> out);

// A file of `size` pseudo-random bytes (seeded), readable by anyone.
void writeStream(const std::string& path, size_t size, uint32_t seed);

// socat -u -b 1024 FILE:path UDP:rxAddr:port from the tx namespace; exit status.
int socatSend(Rig& rig, const std::string& path, uint16_t port);

} // namespace npf::e2e
