#include "daemon/memory_limit.h"

#include <algorithm>
#include <cstdio>

#include "sys/log.h"
#include "sys/netns.h"

namespace npf::daemon {
namespace {

std::string mib(uint64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / double(1 << 20));
    return buf;
}

// "4 RX queues of eth0 (16.3 MiB each at MTU 1500: UMEM and rings)", ", " between interfaces.
std::string describe(const std::vector<IfaceMemory>& plan)
{
    std::string out;
    for (const IfaceMemory& m : plan)
        out += (out.empty() ? "" : ", ") + std::to_string(m.plan.queues) + " RX queue" +
               (m.plan.queues == 1 ? "" : "s") + " of " + m.label + " (" + mib(m.plan.perQueue) + " each at MTU " +
               std::to_string(m.plan.mtu) + ": UMEM and rings)";
    return out;
}

// The most queues per interface that fit `limit` (0: not even one).
uint32_t queuesThatFit(const std::vector<IfaceMemory>& plan, uint64_t limit)
{
    uint32_t most = 0;
    for (const IfaceMemory& m : plan)
        most = std::max(most, m.plan.queues);
    for (uint32_t n = most; n >= 1; n--)
        if (pinnedBytes(plan, n) + kMemoryHeadroom <= limit)
            return n;
    return 0;
}

// Interfaces whose NIC has queues npfd does not serve: the datagrams the NIC
// steers there pass to the kernel.
void warnUnserved(const std::vector<IfaceMemory>& plan)
{
    for (const IfaceMemory& m : plan)
        if (m.plan.queues < m.plan.available)
            NPF_WARN("npfd: %s: serving RX queues 0..%u of %u (--queues): datagrams the NIC steers to the others "
                     "pass to the kernel; steer the flows to the served queues (e.g. ethtool -X %s equal %u)",
                     m.label.c_str(), m.plan.queues - 1, m.plan.available, m.ifname.c_str(), m.plan.queues);
}

} // namespace

std::vector<IfaceMemory> planMemory(const std::vector<std::string>& labels, const std::vector<IfaceSpec>& specs,
                                    const EngineConfig& engine)
{
    std::vector<IfaceMemory> out;
    for (size_t i = 0; i < specs.size(); i++) {
        NetnsScope in(specs[i].netns);
        EngineConfig c = engine;
        c.ifname = specs[i].ifname;
        out.push_back({labels.at(i), specs[i].ifname, planQueues(c)});
    }
    return out;
}

uint64_t pinnedBytes(const std::vector<IfaceMemory>& plan, uint32_t maxQueues)
{
    uint64_t sum = 0;
    for (const IfaceMemory& m : plan)
        sum += uint64_t(std::min(m.plan.queues, maxQueues)) * m.plan.perQueue;
    return sum;
}

void checkMemoryLimit(const std::vector<IfaceMemory>& plan, const std::optional<MemoryLimit>& limit)
{
    warnUnserved(plan);
    const uint64_t pinned = pinnedBytes(plan), need = pinned + kMemoryHeadroom;
    NPF_INFO("npfd: will pin %s for %s; memory limit: %s", mib(pinned).c_str(), describe(plan).c_str(),
             limit ? (mib(limit->bytes) + " (" + limit->file + ")").c_str() : "none");
    if (!limit || need <= limit->bytes)
        return;
    const uint32_t fit = queuesThatFit(plan, limit->bytes);
    const std::string fix = fit ? "serve fewer queues (--queues " + std::to_string(fit) + " fits) or raise the limit"
                                : "raise the limit (not even --queues 1 fits)";
    throw MemoryLimitError(describe(plan) + " pin " + mib(pinned) + ", and npfd needs " +
                           mib(kMemoryHeadroom) + " besides: " + mib(need) + ", above its cgroup's memory limit of " +
                           mib(limit->bytes) + " (" + limit->file + "): " + fix + " to at least " + mib(need) +
                           " for all its queues");
}

} // namespace npf::daemon
