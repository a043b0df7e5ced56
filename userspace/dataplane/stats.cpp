#include "dataplane/stats.h"

#include <linux/bpf.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

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
