// Stops one thread of another process, leaving its other threads running,
// until destruction: how a test makes one of npfd's loops stall the way a
// system call that never returns would. SIGSTOP is no use: it stops every
// thread, the probes' server too. ptrace stops one: PTRACE_SEIZE attaches to
// that thread alone, PTRACE_INTERRUPT puts it in a ptrace stop, and
// PTRACE_DETACH lets it run on. Root (CAP_SYS_PTRACE). ptrace's tracer is a
// thread: construct and destroy on the same one.
#pragma once

#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "wait.h"

namespace npf::test {

// The state letter of /proc/PID/task/TID/stat ('t': stopped by a tracer),
// '\0' if the thread is gone.
inline char threadState(pid_t pid, pid_t tid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')'); // the name may hold spaces and parentheses
    return paren == std::string::npos || paren + 2 >= stat.size() ? '\0' : stat[paren + 2];
}

// The id of the thread of `pid` whose name (comm) is `name`.
inline pid_t threadNamed(pid_t pid, const std::string& name)
{
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
        std::ifstream in(e.path() / "comm");
        std::string comm;
        std::getline(in, comm);
        if (comm == name)
            return pid_t(std::stol(e.path().filename().string()));
    }
    throw std::runtime_error("process " + std::to_string(pid) + " has no thread named " + name);
}

class ThreadFreeze {
public:
    ThreadFreeze(pid_t pid, pid_t tid) : tid_(tid)
    {
        if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0)
            throw std::system_error(errno, std::generic_category(), "PTRACE_SEIZE thread " + std::to_string(tid));
        const int err = ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0                 ? errno
                        : !waitUntil([&] { return threadState(pid, tid) == 't'; }) ? ETIMEDOUT
                                                                                    : 0;
        if (err) {
            (void)::ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
            throw std::system_error(err, std::generic_category(), "stop thread " + std::to_string(tid));
        }
        int status = 0;
        (void)::waitpid(tid, &status, __WALL | WNOHANG); // the stop's notice is ours, not the parent's wait
    }
    ~ThreadFreeze() { (void)::ptrace(PTRACE_DETACH, tid_, nullptr, nullptr); }
    ThreadFreeze(const ThreadFreeze&) = delete;
    ThreadFreeze& operator=(const ThreadFreeze&) = delete;

private:
    pid_t tid_;
};

} // namespace npf::test
