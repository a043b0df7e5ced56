// npfd as a child process of npf-bench (the npf-sidecar contender's, and
// the burst scenario's npfd variant).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "receiver.h"

namespace npf::bench {

// npfd serving cfg.ifname with the npf contender's XDP mode, queues and
// pager mode. It runs in the network namespace of the thread that
// constructs it (fork copies the calling thread's), dies with that thread
// (PR_SET_PDEATHSIG) and is in a process group of its own (a ^C reaches the
// bench, which stops npfd in order). Ready once npfd wrote "ready\n" to its
// --ready-fd; destruction sends SIGTERM (npfd withdraws its flows and
// detaches the program it attached) and SIGKILL after a deadline. Its
// config admits no client rule: root's clients only (the bench's).
// `ownMapping`: client_install_wait_us 0 (npfd installs into its own mapping).
// `delegate`: the interface is delegated (its one client runs the data path).
class NpfdProcess {
public:
    NpfdProcess(const RxConfig& cfg, const std::string& dir, bool ownMapping, bool delegate = false);
    ~NpfdProcess();
    NpfdProcess(const NpfdProcess&) = delete;
    NpfdProcess& operator=(const NpfdProcess&) = delete;

    pid_t pid() const noexcept { return pid_; }
    const std::string& socket() const noexcept { return socket_; }
    const std::string& binary() const noexcept { return binary_; }
    // User + system CPU of all of npfd's threads so far.
    double cpuSeconds() const;
    // The npf contender's CPU placement: worker q on cpus[q % n], pager k
    // on cpus[(n - 1 + k) % n]; npfd's other threads (control, grace
    // periods) are left to the scheduler, as the bench's own are. npfd names
    // its threads when they start: retried until every one is found.
    void pinThreads(const RxConfig& cfg) const;
    // All of npfd on `cpus`: every thread now, and the ones it makes later
    // (they inherit their maker's: the credit thread, made for the first
    // flow that asks for credits).
    void confine(const std::vector<int>& cpus) const;

private:
    void awaitReady(int fd);
    void stop() noexcept;

    std::string ifname_, binary_, socket_, log_;
    pid_t pid_ = -1;
};

} // namespace npf::bench
