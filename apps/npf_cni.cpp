// npf-cni: gives each Kubernetes pod its own way to npfd, without a hostPath
// and without trusting a uid (deploy/k8s/README.md, "Tenancy"; the pods
// protocol in docs/protocol.md).
//
// As a CNI plugin (CNI_COMMAND set; chained after the plugin that gives the
// pod its addresses), on ADD it binds "@npf" in the pod's network namespace
// and hands that listener to npfd with who the pod is (CNI_ARGS) and its
// addresses (prevResult), and keeps a record of it; on DEL it removes the
// record and tells npfd, which disconnects the pod's clients. npfd not
// running is not an error: the record stays, and `npf-cni watch` hands the
// pod over once npfd is up.
//
// As a command: `npf-cni install` (the DaemonSet's init container) copies
// npf-cni to the node's plugin directory and chains it into the node's
// network configuration; `npf-cni watch` (the DaemonSet's helper container)
// hands every recorded pod to npfd each time npfd (re)starts; `npf-cni
// restore` does it once; `npf-cni uninstall` takes it out of the chain.
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>

#include "cli/exit_codes.h"
#include "cli/version.h"
#include "cni/cni.h"
#include "cni/handover.h"
#include "cni/install.h"
#include "cni/records.h"

namespace {

using npf::cni::Call;
using npf::cni::CniError;
using npf::cni::Code;
using npf::cni::Record;
using npf::cni::Records;

void note(const std::string& line) { std::fprintf(stderr, "npf-cni: %s\n", line.c_str()); }

bool npfdAbsent(const std::system_error& e)
{
    const int err = e.code().value();
    return err == ENOENT || err == ECONNREFUSED;
}

// ---- the CNI plugin -------------------------------------------------------------------

void add(const Call& c)
{
    const Record r{npf::cni::podOf(c), c.netns};
    const Records records(c.stateDir);
    try {
        records.save(r);
    } catch (const std::exception& e) {
        throw CniError(Code::IoFailure, std::string("keeping the pod's record: ") + e.what());
    }
    try {
        npf::ipc::Channel ch = npf::ipc::Channel::connect(c.podsSocket);
        bool taken = false;
        npf::cni::handOver(ch, r, &taken);
        if (taken)
            note(r.pod.describe() + ": " + npf::ipc::kPodSocket +
                 " is bound in its network namespace already (an earlier ADD's listener): kept");
    } catch (const CniError&) {
        records.remove(r.pod.container);
        throw;
    } catch (const std::system_error& e) {
        if (!npfdAbsent(e)) {
            records.remove(r.pod.container);
            throw CniError(Code::IoFailure, r.pod.describe() + ": " + e.what());
        }
        note(r.pod.describe() + ": npfd is not running (" + e.what() +
             "): recorded; `npf-cni watch` hands it over when npfd starts");
    }
    std::cout << npf::cni::addResult(c).dump() << "\n";
}

void del(const Call& c)
{
    const Records records(c.stateDir);
    try {
        records.remove(c.containerId);
    } catch (const std::exception& e) {
        throw CniError(Code::IoFailure, std::string("removing the pod's record: ") + e.what());
    }
    try {
        npf::ipc::Channel ch = npf::ipc::Channel::connect(c.podsSocket);
        npf::cni::withdraw(ch, c.containerId);
    } catch (const CniError&) {
        throw;
    } catch (const std::system_error& e) {
        if (!npfdAbsent(e))
            throw CniError(Code::IoFailure, "container " + c.containerId + ": " + e.what());
    }
}

void check(const Call& c)
{
    const npf::ipc::PodInfo want = npf::cni::podOf(c);
    const std::optional<Record> r = Records(c.stateDir).find(c.containerId);
    if (!r)
        throw CniError(Code::UnknownContainer, want.describe() + ": npf-cni has no record of it (no ADD?)");
    if (r->pod.ns != want.ns || r->pod.name != want.name || r->pod.addrs != want.addrs || r->netns != c.netns)
        throw CniError(Code::InvalidNetworkConfig, want.describe() + ": its record (" + r->pod.describe() +
                                                       ") does not match this call");
}

int plugin()
{
    const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    std::string version;
    try {
        const Call c = npf::cni::parseCall([](const char* n) { return std::getenv(n); }, input);
        version = c.cniVersion;
        if (c.command == "VERSION")
            std::cout << npf::cni::versionResult(c.cniVersion).dump() << "\n";
        else if (c.command == "ADD")
            add(c);
        else if (c.command == "DEL")
            del(c);
        else
            check(c);
        return 0;
    } catch (const CniError& e) {
        std::cout << npf::cni::errorResult(version, e).dump() << "\n";
    } catch (const std::exception& e) {
        std::cout << npf::cni::errorResult(version, CniError(Code::IoFailure, e.what())).dump() << "\n";
    }
    return 1;
}

// ---- restore and watch ----------------------------------------------------------------

// Hands every record to npfd on `ch`; drops the records of pods whose
// network namespace is gone (deleted without a DEL). Returns how many failed.
size_t restore(npf::ipc::Channel& ch, const Records& records)
{
    std::vector<std::string> bad;
    const std::vector<Record> all = records.list(&bad);
    for (const std::string& b : bad)
        note("skipped " + b);
    const std::vector<std::string> served = ch.call(npf::ipc::PodsRequest{}).reply.containers;
    size_t handed = 0, failed = 0, kept = 0;
    for (const Record& r : all) {
        if (std::find(served.begin(), served.end(), r.pod.container) != served.end()) {
            ++kept; // npfd has its listener (npfd did not restart; this helper did)
            continue;
        }
        struct stat st;
        if (::stat(r.netns.c_str(), &st) != 0) {
            note(r.pod.describe() + ": its network namespace " + r.netns + " is gone: record removed");
            records.remove(r.pod.container);
            continue;
        }
        try {
            bool taken = false;
            npf::cni::handOver(ch, r, &taken);
            if (taken) {
                note(r.pod.describe() + ": " + npf::ipc::kPodSocket + " is bound in the pod by something else: " +
                     "its clients cannot reach npfd until the pod restarts");
                ++failed;
                continue;
            }
            ++handed;
        } catch (const std::exception& e) {
            note(r.pod.describe() + ": " + e.what());
            ++failed;
        }
    }
    note("handed " + std::to_string(handed) + " of " + std::to_string(all.size()) + " pods to npfd (" +
         std::to_string(kept) + " it had, " + std::to_string(failed) + " failed)");
    return failed;
}

// Until killed: connect to npfd (retrying while it is down), restore, then
// wait for npfd to close the connection (it stopped), and again.
[[noreturn]] void watch(const std::string& socket, const Records& records, int retryMs)
{
    bool waiting = false;
    for (;;) {
        std::optional<npf::ipc::Channel> ch;
        try {
            ch.emplace(npf::ipc::Channel::connect(socket));
        } catch (const std::exception& e) {
            if (!waiting)
                note("waiting for npfd: " + std::string(e.what()));
            waiting = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(retryMs));
            continue;
        }
        waiting = false;
        note("npfd is up at " + socket);
        try {
            (void)restore(*ch, records);
        } catch (const std::exception& e) { // npfd stopped meanwhile: again once it is back
            note(e.what());
            std::this_thread::sleep_for(std::chrono::milliseconds(retryMs));
            continue;
        }
        std::fflush(stderr);
        pollfd p{ch->fd(), POLLIN, 0};
        while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
        }
        note("npfd closed the connection: it stopped");
    }
}

} // namespace

int main(int argc, char** argv)
{
    std::signal(SIGPIPE, SIG_IGN);
    if (std::getenv("CNI_COMMAND"))
        return plugin();

    CLI::App app{"npf-cni: a CNI plugin (run by the container runtime) that gives each pod its own listener\n"
                 "to npfd; as a command, it hands the recorded pods to npfd again after npfd restarts"};
    std::string socket = npf::cni::kDefaultPodsSocket, stateDir = npf::cni::kDefaultStateDir;
    int retryMs = 500;
    app.add_option("--socket", socket, "npfd's pods socket")->capture_default_str();
    app.add_option("--state-dir", stateDir, "npf-cni's records of pods")->capture_default_str();
    app.set_version_flag("--version", npf::cli::versionLine("npf-cni"));
    npf::cni::InstallOptions inst{"/opt/cni/bin", "/etc/cni/net.d", "/proc/self/exe", "", ""};
    CLI::App* installCmd = app.add_subcommand(
        "install", "copy npf-cni into the node's CNI plugin directory and chain it into the node's network "
                   "configuration (the first .conflist of --conf-dir): the DaemonSet's init container");
    CLI::App* uninstallCmd =
        app.add_subcommand("uninstall", "take npf-cni out of the chain (the binary stays)");
    for (CLI::App* cmd : {installCmd, uninstallCmd}) {
        cmd->add_option("--bin-dir", inst.binDir, "the runtime's CNI plugin directory")->capture_default_str();
        cmd->add_option("--conf-dir", inst.confDir, "the runtime's CNI configuration directory")
            ->capture_default_str();
    }
    app.add_subcommand("restore", "hand every recorded pod to npfd once");
    CLI::App* watchCmd = app.add_subcommand("watch", "hand every recorded pod to npfd each time npfd starts");
    watchCmd->add_option("--retry-ms", retryMs, "how often to try npfd's socket while it is down")
        ->check(CLI::Range(10, 60000));
    app.require_subcommand(1);
    app.footer("As a CNI plugin: CNI_COMMAND=ADD|DEL|CHECK|VERSION, the network configuration on stdin\n"
               "({\"type\": \"npf-cni\", \"socket\": ..., \"state_dir\": ...}; deploy/k8s/README.md).");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return app.exit(e);
        std::fprintf(stderr, "npf-cni: error: %s (npf-cni --help)\n", e.what());
        return npf::cli::kExitUsage;
    }
    const Records records(stateDir);
    try {
        if (*installCmd || *uninstallCmd) {
            inst.socket = socket;
            inst.stateDir = stateDir;
            const npf::cni::InstallResult r = *installCmd ? npf::cni::install(inst) : npf::cni::uninstall(inst);
            std::printf("npf-cni: %s %s\n", r.changed ? (*installCmd ? "chained into" : "taken out of") : "unchanged:",
                        r.conflist.c_str());
            return npf::cli::kExitOk;
        }
        if (*watchCmd)
            watch(socket, records, retryMs);
        npf::ipc::Channel ch = npf::ipc::Channel::connect(socket);
        return restore(ch, records) ? npf::cli::kExitFailure : npf::cli::kExitOk;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "npf-cni: error: %s\n", e.what());
        return npf::cli::exitCodeFor(e);
    }
}
