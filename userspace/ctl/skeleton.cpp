#include "ctl/skeleton.h"

#include <string>

#include "sys/error.h"

namespace npf::ctl {

Skeleton Skeleton::open(const LoadConfig& cfg)
{
    if (cfg.queues == 0 || cfg.queues > NPF_MAX_QUEUES)
        throwErrno(EINVAL, "npf_xdp: " + std::to_string(cfg.queues) + " queues (must be 1 .. " +
                               std::to_string(NPF_MAX_QUEUES) + ")");
    Skeleton s;
    s.cfg_ = cfg;
    s.skel_.reset(npf_xdp__open());
    if (!s.skel_)
        throwErrno("open BPF object npf_xdp");
    checkNeg(bpf_map__set_max_entries(s.skel_->maps.npf_xsks, s.cfg_.queues * 2), "size npf_xsks");
    return s;
}

void Skeleton::load()
{
    checkNeg(npf_xdp__load(skel_.get()), "load BPF program npf_xdp (run with -v for the verifier log)");
}

} // namespace npf::ctl
