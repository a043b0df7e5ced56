#include "ctl/stats.h"

#include <linux/bpf.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ctl/dataplane.h"
#include "sys/error.h"

namespace npf::ctl {

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

Counters xdpCounters(const XdpStats& s)
{
    Counters c;
    c.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i)
        c.push_back({"xdp", kStatNames[i], s[i]});
    return c;
}

} // namespace npf::ctl
