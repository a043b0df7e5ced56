#include "run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "sys/error.h"
#include "sys/fd.h"

namespace npf::itest {
namespace {

struct Pipe {
    Fd rd, wr;
    Pipe()
    {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0)
            throwErrno("pipe2 for a test command");
        rd.reset(fds[0]);
        wr.reset(fds[1]);
    }
};

} // namespace

RunResult run(const std::string& cmd, std::chrono::milliseconds deadline)
{
    RunResult r;
    r.cmd = cmd;
    Pipe out, err;
    pid_t pid = fork();
    if (pid < 0)
        throwErrno("fork for: " + cmd);
    if (pid == 0) {
        // Own process group, so a deadline kills the whole pipeline.
        setpgid(0, 0);
        dup2(out.wr.get(), STDOUT_FILENO);
        dup2(err.wr.get(), STDERR_FILENO);
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    setpgid(pid, pid);
    out.wr.reset();
    err.wr.reset();

    auto end = std::chrono::steady_clock::now() + deadline;
    pollfd pfd[2] = {{out.rd.get(), POLLIN, 0}, {err.rd.get(), POLLIN, 0}};
    std::string* sink[2] = {&r.out, &r.err};
    int open = 2;
    while (open > 0) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            r.timedOut = true;
            kill(-pid, SIGKILL);
            break;
        }
        int n = poll(pfd, 2, static_cast<int>(left.count()));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throwErrno("poll output of: " + cmd);
        for (int i = 0; i < 2; i++) {
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            ssize_t got = ::read(pfd[i].fd, buf, sizeof(buf));
            if (got > 0) {
                sink[i]->append(buf, static_cast<size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                pfd[i].fd = -1;
                open--;
            }
        }
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    r.status = (!r.timedOut && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
    return r;
}

Streaming::Streaming(const std::vector<std::string>& argv)
{
    for (const std::string& a : argv)
        cmd_ += (cmd_.empty() ? "" : " ") + a;
    Pipe out, err;
    std::vector<char*> args;
    for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ < 0)
        throwErrno("fork for: " + cmd_);
    if (pid_ == 0) {
        dup2(out.wr.get(), STDOUT_FILENO);
        dup2(err.wr.get(), STDERR_FILENO);
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        execvp(args[0], args.data());
        _exit(127);
    }
    out_ = std::move(out.rd);
    errFd_ = std::move(err.rd);
}

Streaming::~Streaming()
{
    if (pid_ > 0) {
        kill(pid_, SIGKILL);
        while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
}

bool Streaming::pump(int ms)
{
    pollfd pfd[2] = {{out_ ? out_.get() : -1, POLLIN, 0}, {errFd_ ? errFd_.get() : -1, POLLIN, 0}};
    int n = poll(pfd, 2, ms);
    if (n < 0 && errno != EINTR)
        throwErrno("poll output of: " + cmd_);
    Fd* fds[2] = {&out_, &errFd_};
    std::string* sink[2] = {&buf_, &err_};
    for (int i = 0; n > 0 && i < 2; i++) {
        if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        char b[4096];
        ssize_t got = ::read(pfd[i].fd, b, sizeof(b));
        if (got > 0)
            sink[i]->append(b, static_cast<size_t>(got));
        else if (got == 0 || errno != EINTR)
            fds[i]->reset();
    }
    return bool(out_);
}

std::optional<std::string> Streaming::readLine(std::chrono::milliseconds deadline)
{
    const auto end = std::chrono::steady_clock::now() + deadline;
    for (;;) {
        if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !pump(static_cast<int>(left.count())))
            return std::nullopt;
    }
}

void Streaming::signal(int sig)
{
    if (pid_ > 0)
        kill(pid_, sig);
}

RunResult Streaming::finish(std::chrono::milliseconds deadline)
{
    RunResult r;
    r.cmd = cmd_;
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (out_ || errFd_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            r.timedOut = true;
            kill(pid_, SIGKILL);
            break;
        }
        pump(static_cast<int>(left.count()));
    }
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    r.status = (!r.timedOut && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
    r.out = std::move(buf_);
    r.err = err_;
    return r;
}

std::string describe(const RunResult& r)
{
    std::string s = r.cmd + " -> " + (r.timedOut ? std::string("timed out") : "status " + std::to_string(r.status));
    s += "\nstdout: " + r.out + "\nstderr: " + r.err;
    return s;
}

} // namespace npf::itest
