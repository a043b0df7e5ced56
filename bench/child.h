// A program npf-bench runs as a child (npf-recv, npf-send, trafgen) and
// what it reads of it: its JSON summary.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <initializer_list>
#include <string>
#include <vector>

#include "run.h"
#include "scenarios.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/fd.h"

namespace npf::bench {

constexpr int kReadyFd = 3; // npf-recv's --ready-fd in the child

// A child process: argv run with stderr (and stdout) to `log`, stdin from
// /dev/null; with readyFd, its fd kReadyFd is a pipe whose read end
// ready() reads. Killed with its parent (PR_SET_PDEATHSIG) and on
// destruction if still running.
class Child {
public:
    Child(std::vector<std::string> args, const std::string& log, bool readyFd)
    {
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        int p[2] = {-1, -1};
        if (readyFd && ::pipe2(p, O_CLOEXEC) != 0)
            throwErrno("ready pipe for " + args[0]);
        ready_ = Fd(p[0]);
        Fd writeEnd(p[1]);
        Fd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!out || !null)
            throwErrno("open " + log + " and /dev/null for " + args[0]);
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ < 0)
            throwErrno("fork for " + args[0]);
        if (pid_ == 0) { // async-signal-safe calls only until exec
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent || ::dup2(null.get(), STDIN_FILENO) < 0 ||
                ::dup2(out.get(), STDOUT_FILENO) < 0 || ::dup2(out.get(), STDERR_FILENO) < 0 ||
                (writeEnd && ::dup2(writeEnd.get(), kReadyFd) < 0))
                ::_exit(127);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~Child()
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    // "ready\n" on the pipe within `seconds`.
    bool ready(double seconds)
    {
        pollfd p{ready_.get(), POLLIN, 0};
        char buf[8] = {};
        return ::poll(&p, 1, int(seconds * 1000)) == 1 && ::read(ready_.get(), buf, sizeof buf) >= 6 &&
               std::string(buf, 6) == "ready\n";
    }
    // Exit status within `seconds` (-1: still running; it is killed then).
    int wait(double seconds)
    {
        const uint64_t until = monotonicNs() + uint64_t(seconds * 1e9);
        int st = 0;
        while (::waitpid(pid_, &st, WNOHANG) == 0) {
            if (monotonicNs() > until || g_interrupted)
                return -1;
            ::usleep(10000);
        }
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }

private:
    pid_t pid_ = -1;
    Fd ready_;
};

// npf-recv --json's (npf-send --json's) summary: the last line of its stderr that is a JSON object.
inline Json summaryOf(const std::string& log)
{
    size_t end = log.size();
    while (end > 0) {
        const size_t start = log.rfind('\n', end - 1);
        const size_t from = start == std::string::npos ? 0 : start + 1;
        if (from < end && log[from] == '{')
            return Json::parse(log.substr(from, end - from), nullptr, false);
        if (start == std::string::npos)
            break;
        end = start;
    }
    return Json();
}

inline uint64_t at(const Json& j, std::initializer_list<const char*> path)
{
    const Json* p = &j;
    for (const char* k : path) {
        if (!p->is_object() || !p->contains(k))
            return 0;
        p = &(*p)[k];
    }
    return p->is_number() ? p->get<uint64_t>() : 0;
}

} // namespace npf::bench
