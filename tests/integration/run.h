// Runs a shell command with a deadline and captures stdout, stderr and the
// exit status separately (npfctl prints results on stdout, notes and errors
// on stderr).
#pragma once

#include <chrono>
#include <string>

namespace npf::itest {

struct RunResult {
    std::string cmd;
    int status = -1; // exit code; -1 if killed by a signal or the deadline
    bool timedOut = false;
    std::string out;
    std::string err;
};

RunResult run(const std::string& cmd, std::chrono::milliseconds deadline = std::chrono::seconds(30));

// "cmd -> status N\nstdout: ...\nstderr: ..." for assertion messages.
std::string describe(const RunResult& r);

} // namespace npf::itest
