#include "npfd_rig.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

namespace npf::e2e {

Npfd::Npfd(Rig& rig, const TempDir& dir, std::vector<std::string> extraArgs)
    : Npfd(rig, dir, NpfdOptions{.extraArgs = std::move(extraArgs)})
{
}

Npfd::Npfd(Rig& rig, const TempDir& dir, NpfdOptions opt)
    : rig_(rig), dir_(dir.path), config_(dir.path + "/npfd.json"), socket_(dir.path + "/npfd.sock"),
      log_(dir.path + "/npfd.log"), opt_(std::move(opt))
{
    ::chmod(dir_.c_str(), 0777); // clients (uid 65534) write their output here
    const std::string clients = !opt_.clients.empty() ? opt_.clients : R"([{"uid": 65534, "ports": ["7400-7499"],
    "region_bytes": 536870912, "resident_bytes": 268435456, "flows": 4}])";
    std::ofstream(config_) << R"({"ifaces": [")" << rig.rxIf() << R"("], "socket": ")" << socket_
                           << R"(", "socket_group": "nogroup", "spill_dir": "/var/tmp",)" << "\n  "
                           << (opt_.settings.empty() ? "" : opt_.settings + ",\n  ") << R"("clients": )" << clients
                           << "}";
    start();
}

void Npfd::start()
{
    std::vector<std::string> args = opt_.wrapper;
    args.insert(args.end(), {NPFD_PATH, "-c", config_});
    args.insert(args.end(), opt_.extraArgs.begin(), opt_.extraArgs.end());
    stopTimedOut_ = false;
    child_ = std::make_unique<Child>(rig_.veth().rxNs().path(), args, log_, true);
    auto r = child_->ready();
    if (!r)
        throw std::runtime_error(std::string("npfd did not start: ") + r.message());
}

Npfd::~Npfd()
{
    if (child_ && child_->running()) {
        int st;
        bool exited = false;
        if (!stopTimedOut_) { // else it waited already: npfd is stuck
            child_->kill(SIGTERM);
            exited = child_->wait(int(test::kDeadline.count()), &st);
        }
        if (!exited)
            child_->kill(SIGKILL); // ~Child reaps it
    }
    // npfd attached the program; a killed one leaves it: detach.
    rig_.npfctl("detach " + rig_.rxIf());
}

std::string Npfd::log() const { return readFile(log_); }

int Npfd::stop()
{
    child_->kill(SIGTERM);
    int st = -1;
    if (child_->wait(int(test::kDeadline.count()), &st))
        return st;
    stopTimedOut_ = true;
    return -1;
}

size_t Npfd::openFds() const
{
    std::error_code ec;
    size_t n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid()) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        n++;
    return n;
}

uint64_t Npfd::rssKiB() const
{
    std::ifstream in("/proc/" + std::to_string(pid()) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("VmRSS:"))
            return std::stoull(line.substr(6));
    return 0;
}

std::unique_ptr<Child> startClientRecv(Rig& rig, const Npfd& d, uint16_t port, const std::string& out,
                                       const std::string& err, const std::vector<std::string>& extra)
{
    return startClientRecvAs(kNobody, rig, d, port, out, err, extra);
}

std::unique_ptr<Child> startClientRecvAs(uid_t uid, Rig& rig, const Npfd& d, uint16_t port, const std::string& out,
                                         const std::string& err, const std::vector<std::string>& extra)
{
    std::vector<std::string> a = {"setpriv",     "--reuid=" + std::to_string(uid), "--regid=65534", "--clear-groups",
                                  NPF_RECV_PATH, rig.rxIf(),                       std::to_string(port),
                                  "--connect",   d.socket(),                       "-o",            out};
    a.insert(a.end(), extra.begin(), extra.end());
    auto c = std::make_unique<Child>(rig.veth().rxNs().path(), a, err, true);
    return c;
}

size_t awaitCompletions(Flow& f, std::span<npf_completion> out)
{
    using namespace std::chrono_literals;
    size_t got = 0;
    const auto end = std::chrono::steady_clock::now() + test::kDeadline;
    while (got < out.size() && std::chrono::steady_clock::now() < end) {
        const int k = f.wait(out.subspan(got), 100ms);
        if (k < 0)
            break;
        got += static_cast<size_t>(k);
    }
    return got;
}

void writeStream(const std::string& path, size_t size, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::string data(size, '\0');
    for (char& c : data)
        c = static_cast<char>(rng());
    std::ofstream(path, std::ios::binary).write(data.data(), std::streamsize(data.size()));
    ::chmod(path.c_str(), 0644);
}

int socatSend(Rig& rig, const std::string& path, uint16_t port)
{
    return test::sh(rig.veth().txNs().exec() + "socat -u -b 1024 FILE:" + path + " UDP:" + rig.rxAddr() + ":" +
                    std::to_string(port));
}

} // namespace npf::e2e
