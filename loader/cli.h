// npfctl command line: the subcommand table and its options (CLI11).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "npf/abi.h"

namespace npf::cli {

enum class Command { None, Attach, Detach, Status, Stats, FlowAdd, FlowDel, FlowList };

struct Options {
    Command cmd = Command::None;
    int verbose = 0;
    std::string ifname; // empty: status of all interfaces
    std::string mode = "native";
    uint32_t queues = 0; // 0: the interface's RX queue count
    bool force = false;
    std::string then;          // attach --then PATH
    bool thenExisting = false; // attach --then-existing
    bool json = false;
    double watch = 0; // seconds between samples; 0: print once
    std::string port; // validated by dataplane::parsePort
    std::string addr;
};

// Parses args (args[0] is the program name). Returns the exit code when
// parsing ends the run (--help, --version: 0, after printing to `out`; a usage
// error: 2, after one "npfctl: error: ..." line on `err`), else nullopt.
std::optional<int> parseArgs(const std::vector<std::string>& args, Options& opt, std::ostream& out,
                             std::ostream& err);

} // namespace npf::cli
