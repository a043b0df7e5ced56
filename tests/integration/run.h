// Runs a shell command with a deadline and captures stdout, stderr and the
// exit status separately (npfctl prints results on stdout, notes and errors
// on stderr).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "sys/fd.h"
#include "wait.h"

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

// A program (argv, no shell: the pid is the program's) whose stdout the test
// reads line by line while it runs, e.g. `npfctl stats --watch`.
class Streaming {
public:
    explicit Streaming(const std::vector<std::string>& argv);
    ~Streaming(); // SIGKILL and reap if still running
    Streaming(const Streaming&) = delete;
    Streaming& operator=(const Streaming&) = delete;

    // The next line of stdout without its newline; nullopt at end of file
    // or once `deadline` passed.
    std::optional<std::string> readLine(std::chrono::milliseconds deadline = test::kDeadline);
    void signal(int sig);
    // Waits for the exit (SIGKILL after `deadline`): status as run() gives
    // it, out = stdout not yet read as lines, err = all of stderr.
    RunResult finish(std::chrono::milliseconds deadline = test::kDeadline);
    const std::string& err() const { return err_; } // stderr so far

private:
    // Reads what is there (waiting up to `ms`); false at end of file of stdout.
    bool pump(int ms);
    std::string cmd_;
    pid_t pid_ = -1;
    Fd out_, errFd_;
    std::string buf_, err_;
};

} // namespace npf::itest
