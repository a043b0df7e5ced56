#include "npfd_rig.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>

namespace npf::e2e {

Npfd::Npfd(Rig& rig, const TempDir& dir, std::vector<std::string> extraArgs)
    : rig_(rig), dir_(dir.path), config_(dir.path + "/npfd.json"), socket_(dir.path + "/npfd.sock"),
      log_(dir.path + "/npfd.log"), extraArgs_(std::move(extraArgs))
{
    ::chmod(dir_.c_str(), 0777); // clients (uid 65534) write their output here
    std::ofstream(config_) << R"({"ifaces": [")" << rig.rxIf() << R"("], "socket": ")" << socket_
                           << R"(", "socket_group": "nogroup", "spill_dir": "/var/tmp",
  "clients": [{"uid": 65534, "ports": ["7400-7499"], "region_bytes": 536870912, "resident_bytes": 268435456,
               "flows": 4}]})";
    start();
}

void Npfd::start()
{
    std::vector<std::string> args{NPFD_PATH, "-c", config_};
    args.insert(args.end(), extraArgs_.begin(), extraArgs_.end());
    child_ = std::make_unique<Child>(rig_.veth().rxNs().path(), args, log_, true);
    auto r = child_->ready();
    if (!r)
        throw std::runtime_error(std::string("npfd did not start: ") + r.message());
}

Npfd::~Npfd()
{
    if (child_ && child_->running()) {
        child_->kill(SIGTERM);
        int st;
        if (!child_->wait(int(test::kDeadline.count()), &st))
            child_->kill(SIGKILL);
    }
    // npfd attached the program; a killed one leaves it: detach.
    rig_.npfctl("detach " + rig_.rxIf());
}

std::string Npfd::log() const { return readFile(log_); }

int Npfd::stop()
{
    child_->kill(SIGTERM);
    int st = -1;
    return child_->wait(int(test::kDeadline.count()), &st) ? st : -1;
}

std::unique_ptr<Child> startClientRecv(Rig& rig, const Npfd& d, uint16_t port, const std::string& out,
                                       const std::string& err, const std::vector<std::string>& extra)
{
    std::vector<std::string> a = {"setpriv",     "--reuid=65534",       "--regid=65534", "--clear-groups",
                                  NPF_RECV_PATH, rig.rxIf(),            std::to_string(port),
                                  "--connect",   d.socket(),            "-o",            out};
    a.insert(a.end(), extra.begin(), extra.end());
    auto c = std::make_unique<Child>(rig.veth().rxNs().path(), a, err, true);
    return c;
}

size_t awaitCompletions(Flow& f, std::span<npf_completion> out)
{
    using namespace std::chrono_literals;
    size_t got = 0;
    const auto end = std::chrono::steady_clock::now() + test::kDeadline;
    while (got < out.size() && std::chrono::steady_clock::now() < end)
        got += f.wait(out.subspan(got), 100ms);
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
