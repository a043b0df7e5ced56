#include "cli.h"

#include <CLI/CLI.hpp>

#include <ostream>

#include "dataplane/stats.h"
#include "cli/exit_codes.h"
#include "cli/version.h"

namespace npf::cli {
namespace {

void addIface(CLI::App* sub, Options& opt, bool required = true)
{
    auto* o = sub->add_option("IFACE", opt.ifname, "network interface (in this network namespace)");
    if (required)
        o->required();
}

// `npfctl stats --help`: the XDP counters with their help lines (NPF_STATS).
std::string xdpCounterHelp()
{
    std::string s = "XDP counters (rows xdp.*; the engine's: docs/cli.md, Counters):\n";
    for (size_t i = 0; i < std::size(dataplane::kStatNames); i++) {
        const std::string name = dataplane::kStatNames[i];
        s += "  " + name + std::string(name.size() < 16 ? 16 - name.size() : 1, ' ') + dataplane::kStatHelp[i] + "\n";
    }
    return s;
}

void setup(CLI::App& app, Options& opt)
{
    app.require_subcommand(1);
    app.fallthrough(); // -v is accepted after the subcommand too
    app.set_version_flag("--version", versionLine("npfctl"));
    app.add_flag("-v,--verbose", opt.verbose, "more output; repeat for libbpf/libxdp debug (-vv)");

    auto* attach = app.add_subcommand("attach", "load npf_xdp, pin its maps and attach it to IFACE");
    addIface(attach, opt);
    attach->add_option("--mode", opt.mode, "XDP mode (default native)")
        ->check(CLI::IsMember({"native", "skb"}));
    attach->add_option("--queues", opt.queues, "RX queues with socket slots (default: IFACE's RX queue count)")
        ->check(CLI::Range(1u, static_cast<uint32_t>(NPF_MAX_QUEUES)));
    attach->add_flag("--force", opt.force, "replace a foreign XDP program");
    auto* then = attach->add_option("--then", opt.then,
                                    "chain the XDP program pinned at PATH behind npf_xdp: it gets every packet "
                                    "npf passes (taken over if it is the one attached to IFACE)");
    then->type_name("PATH");
    attach->add_flag("--then-existing", opt.thenExisting,
                     "take over the XDP program attached to IFACE: npf_xdp replaces it in one step and passes it "
                     "every packet npf does not take (opens it by id: needs CAP_SYS_ADMIN)")
        ->excludes(then);
    attach->callback([&] { opt.cmd = Command::Attach; });

    auto* detach = app.add_subcommand("detach", "detach npf from IFACE and remove its pins (idempotent)");
    addIface(detach, opt);
    detach->add_flag("--force", opt.force,
                     "also remove foreign XDP programs and the one chained behind npf_xdp (else put back in its "
                     "place), and pins of an interface that is gone");
    detach->callback([&] { opt.cmd = Command::Detach; });

    auto* status = app.add_subcommand("status", "npf instances: IFACE, or all in this network namespace");
    addIface(status, opt, false);
    status->add_flag("--json", opt.json, "JSON output");
    status->callback([&] { opt.cmd = Command::Status; });

    auto* stats = app.add_subcommand("stats", "counters of the npf instance on IFACE");
    addIface(stats, opt);
    stats->add_flag("--json", opt.json, "JSON output (one object per line with --watch)");
    stats->add_option("--watch", opt.watch, "repeat every SECS seconds with per-second rates, until Ctrl-C")
        ->check(CLI::Range(0.1, 86400.0));
    stats->footer(xdpCounterHelp());
    stats->callback([&] { opt.cmd = Command::Stats; });

    auto* flow = app.add_subcommand("flow", "manage flows (UDP destinations npf delivers)");
    flow->require_subcommand(1);
    auto* add = flow->add_subcommand("add", "add a flow; prints its id");
    addIface(add, opt);
    add->add_option("PORT", opt.port, "UDP destination port")->required();
    add->add_option("--addr", opt.addr, "destination IPv4/IPv6 address (default: any)");
    add->callback([&] { opt.cmd = Command::FlowAdd; });
    auto* del = flow->add_subcommand("del", "remove a flow");
    addIface(del, opt);
    del->add_option("PORT", opt.port, "UDP destination port")->required();
    del->add_option("--addr", opt.addr, "destination IPv4/IPv6 address (default: any)");
    del->callback([&] { opt.cmd = Command::FlowDel; });
    auto* list = flow->add_subcommand("list", "list flows with their post ring cursors");
    addIface(list, opt);
    list->add_flag("--json", opt.json, "JSON output");
    list->callback([&] { opt.cmd = Command::FlowList; });
}

} // namespace

std::optional<int> parseArgs(const std::vector<std::string>& args, Options& opt, std::ostream& out,
                             std::ostream& err)
{
    CLI::App app("npf: network page-fault tolerant UDP receive (XDP + AF_XDP) — control tool", "npfctl");
    setup(app, opt);
    std::vector<const char*> argv;
    for (const std::string& a : args)
        argv.push_back(a.c_str());
    try {
        app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return app.exit(e, out, err);
        err << "npfctl: error: " << e.what() << " (npfctl --help)\n";
        return kExitUsage;
    }
    return std::nullopt;
}

} // namespace npf::cli
