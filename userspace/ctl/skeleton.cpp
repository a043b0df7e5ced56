#include "ctl/skeleton.h"

#include <string>

#include "sys/error.h"

namespace npf::ctl {

Skeleton Skeleton::open(const LoadConfig& cfg)
{
    if (cfg.regionPages == 0 || cfg.regionPages > NPF_MAX_REGION_PAGES)
        throwErrno(EINVAL, "npf_xdp: region of " + std::to_string(cfg.regionPages) +
                               " pages (must be 1 .. " + std::to_string(NPF_MAX_REGION_PAGES) + ")");
    if (cfg.queues == 0 || cfg.queues > NPF_MAX_QUEUES)
        throwErrno(EINVAL, "npf_xdp: " + std::to_string(cfg.queues) + " queues (must be 1 .. " +
                               std::to_string(NPF_MAX_QUEUES) + ")");
    Skeleton s;
    s.cfg_ = cfg;
    s.cfg_.regionPages = roundRegionPages(cfg.regionPages);
    s.skel_.reset(npf_xdp__open());
    if (!s.skel_)
        throwErrno("open BPF object npf_xdp");
    s.skel_->rodata->npf_region_pages = s.cfg_.regionPages;
    checkNeg(bpf_map__set_max_entries(s.skel_->maps.npf_resident,
                                      static_cast<uint32_t>(s.cfg_.regionPages / 64)),
             "size npf_resident");
    checkNeg(bpf_map__set_max_entries(s.skel_->maps.npf_xsks, s.cfg_.queues * 2), "size npf_xsks");
    return s;
}

void Skeleton::load()
{
    checkNeg(npf_xdp__load(skel_.get()), "load BPF program npf_xdp (run with -v for the verifier log)");
}

} // namespace npf::ctl
