// npfctl: attach / detach / status / stats / flow management for npf.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <system_error>

#include "cli.h"
#include "cli/exit_codes.h"
#include "commands.h"
#include "sys/log.h"

int main(int argc, char** argv)
{
    using namespace npf::cli;
    Options opt;
    std::vector<std::string> args(argv, argv + argc);
    if (std::optional<int> rc = parseArgs(args, opt, std::cout, std::cerr))
        return *rc;
    npf::log::setVerbosity(opt.verbose);
    npf::log::routeLibbpf();
    try {
        return run(opt);
    } catch (const std::exception& e) {
        int rc = exitCodeFor(e);
        std::fflush(stdout);
        std::fprintf(stderr, "npfctl: error: %s\n", e.what());
        return rc;
    }
}
