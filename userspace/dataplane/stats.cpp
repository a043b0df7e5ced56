#include "dataplane/stats.h"

#include <linux/bpf.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dataplane/dataplane.h"
#include "sys/error.h"

namespace npf::dataplane {

XdpStats readXdpStats(const Dataplane& dp)
{
    int ncpu = checkNeg(libbpf_num_possible_cpus(), "count possible CPUs");
    std::vector<uint64_t> percpu(static_cast<size_t>(ncpu));
    XdpStats out{};
    for (uint32_t i = 0; i < NPF_STAT_MAX; ++i) {
        checkErrno(bpf_map_lookup_elem(dp.stats(), &i, percpu.data()),
                   std::string("read npf_stats[") + kStatNames[i] + "] of " + dp.ifname());
        for (uint64_t v : percpu)
            out[i] += v;
    }
    return out;
}

FlowXdpStats readFlowXdpStats(const Dataplane& dp, uint32_t id, uint32_t gen)
{
    const int ncpu = checkNeg(libbpf_num_possible_cpus(), "count possible CPUs");
    std::vector<npf_flow_stats> percpu(static_cast<size_t>(ncpu));
    checkErrno(bpf_map_lookup_elem(dp.flowStats(), &id, percpu.data()),
               "read npf_flow_stats[" + std::to_string(id) + "] of " + dp.ifname());
    FlowXdpStats out{};
    for (const npf_flow_stats& v : percpu)
        if (v.gen == gen)
            for (size_t i = 0; i < out.size(); ++i)
                out[i] += v.n[i];
    return out;
}

void resetFlowXdpStats(const Dataplane& dp, uint32_t id, uint32_t gen)
{
    const int ncpu = checkNeg(libbpf_num_possible_cpus(), "count possible CPUs");
    std::vector<npf_flow_stats> percpu(static_cast<size_t>(ncpu), npf_flow_stats{.gen = gen});
    checkErrno(bpf_map_update_elem(dp.flowStats(), &id, percpu.data(), BPF_ANY),
               "reset npf_flow_stats[" + std::to_string(id) + "] of " + dp.ifname());
}

uint32_t flowGeneration(const Dataplane& dp, uint32_t id)
{
    const int ncpu = checkNeg(libbpf_num_possible_cpus(), "count possible CPUs");
    std::vector<npf_flow_stats> percpu(static_cast<size_t>(ncpu));
    checkErrno(bpf_map_lookup_elem(dp.flowStats(), &id, percpu.data()),
               "read npf_flow_stats[" + std::to_string(id) + "] of " + dp.ifname());
    uint32_t gen = 0;
    for (const npf_flow_stats& v : percpu)
        gen = std::max(gen, v.gen);
    return gen;
}

const char* xdpVerdictName(int verdict)
{
    switch (verdict) {
    case XDP_ABORTED: return "ABORTED";
    case XDP_DROP: return "DROP";
    case XDP_PASS: return "PASS";
    case XDP_TX: return "TX";
    case XDP_REDIRECT: return "REDIRECT";
    }
    return "?";
}

} // namespace npf::dataplane
