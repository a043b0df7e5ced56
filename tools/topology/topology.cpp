#include "topology.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "sys/error.h"

namespace npf::topology {

int sh(const std::string& cmd)
{
    int st = std::system(cmd.c_str());
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

std::string shOut(const std::string& cmd, int* status)
{
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) {
        if (status)
            *status = -1;
        return out;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
        out.append(buf, n);
    int st = pclose(p);
    if (status)
        *status = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
    return out;
}

std::string uniqueName(const std::string& prefix)
{
    static std::atomic<int> counter{0};
    std::string name = prefix + std::to_string(getpid() % 100000) + "x" + std::to_string(counter++);
    if (name.size() > 15)
        name = name.substr(name.size() - 15);
    return name;
}

Netns::Netns(const std::string& prefix) : name_(uniqueName(prefix))
{
    if (sh("ip netns add " + name_) != 0)
        throw std::runtime_error("ip netns add " + name_ + " failed");
}

Netns::~Netns() { sh("ip netns del " + name_ + " 2>/dev/null"); }

NetnsGuard::NetnsGuard(const Netns& ns)
{
    orig_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!orig_)
        throwErrno("open /proc/thread-self/ns/net");
    Fd target(::open(ns.path().c_str(), O_RDONLY | O_CLOEXEC));
    if (!target)
        throwErrno("open " + ns.path());
    if (setns(target.get(), CLONE_NEWNET) != 0)
        throwErrno("setns " + ns.path());
}

NetnsGuard::~NetnsGuard()
{
    if (orig_)
        (void)setns(orig_.get(), CLONE_NEWNET);
}

namespace {
std::string macOf(const Netns& ns, const std::string& ifname)
{
    // /sys shows the mounter's namespace under nsenter: ask ip instead.
    std::string mac = shOut(ns.exec() + "ip -br link show dev " + ifname + " | awk '{print $3}'");
    while (!mac.empty() && (mac.back() == '\n' || mac.back() == ' '))
        mac.pop_back();
    return mac;
}
} // namespace

VethPair::VethPair(VethOptions opt) : rx_("npfr"), tx_("npft")
{
    static std::atomic<int> subnet{0};
    std::string base = uniqueName("v");
    rxIf_ = base + "r";
    txIf_ = base + "t";
    if (rxIf_.size() > 15) {
        rxIf_ = rxIf_.substr(rxIf_.size() - 15);
        txIf_ = txIf_.substr(txIf_.size() - 15);
    }
    // 198.18.0.0/15 only: third octet from pid and counter, /30 per pair.
    int n = (getpid() * 7 + subnet++) % 16384;
    std::string net = "198." + std::to_string(18 + n / 8192) + "." + std::to_string((n / 64) % 128 + 0) +
                      ".";
    int host = (n % 64) * 4;
    rxAddr_ = net + std::to_string(host + 1);
    txAddr_ = net + std::to_string(host + 2);
    std::string q = std::to_string(opt.queues);
    std::string cmd = "ip link add " + rxIf_ + " numtxqueues " + q + " numrxqueues " + q + " netns " +
                      rx_.name() + " type veth peer name " + txIf_ + " numtxqueues " + q +
                      " numrxqueues " + q + " netns " + tx_.name();
    if (sh(cmd) != 0)
        throw std::runtime_error("failed: " + cmd);
    if (!opt.rxName.empty()) {
        if (sh(rx_.exec() + "ip link set " + rxIf_ + " name " + opt.rxName) != 0)
            throw std::runtime_error("renaming veth " + rxIf_ + " to " + opt.rxName + " in " + rx_.name() + " failed");
        rxIf_ = opt.rxName;
    }
    std::string mtu = std::to_string(opt.mtu);
    bool ok = sh(rx_.exec() + "ip link set " + rxIf_ + " mtu " + mtu + " up") == 0 &&
              sh(tx_.exec() + "ip link set " + txIf_ + " mtu " + mtu + " up") == 0 &&
              sh(rx_.exec() + "ip link set lo up") == 0 && sh(tx_.exec() + "ip link set lo up") == 0 &&
              sh(rx_.exec() + "ip addr add " + rxAddr_ + "/30 dev " + rxIf_) == 0 &&
              sh(tx_.exec() + "ip addr add " + txAddr_ + "/30 dev " + txIf_) == 0;
    if (!ok)
        throw std::runtime_error("configuring veth " + rxIf_ + "/" + txIf_ + " failed");
    // The local stack leaves UDP checksums to a veth's tx offload, which
    // never computes them: what arrives carries a partial checksum. Off, the
    // stack writes full checksums, as a sender on a real wire does (npf
    // verifies them; see docs/architecture.md).
    if (!opt.txChecksumOffload &&
        (sh(rx_.exec() + "ethtool -K " + rxIf_ + " tx off >/dev/null") != 0 ||
         sh(tx_.exec() + "ethtool -K " + txIf_ + " tx off >/dev/null") != 0))
        throw std::runtime_error("ethtool -K tx off on veth " + rxIf_ + "/" + txIf_ + " failed");
    rxMac_ = macOf(rx_, rxIf_);
    txMac_ = macOf(tx_, txIf_);
    ok = sh(tx_.exec() + "ip neigh replace " + rxAddr_ + " lladdr " + rxMac_ + " dev " + txIf_) == 0 &&
         sh(rx_.exec() + "ip neigh replace " + txAddr_ + " lladdr " + txMac_ + " dev " + rxIf_) == 0;
    if (!ok)
        throw std::runtime_error("static neighbours on " + rxIf_ + "/" + txIf_ + " failed");
}

// Deleting the namespaces destroys the veth pair with them.
VethPair::~VethPair() = default;

} // namespace npf::topology
