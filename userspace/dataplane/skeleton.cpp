#include "dataplane/skeleton.h"

#include <string>

#include "dataplane/kernel.h"
#include "sys/error.h"

namespace npf::dataplane {

Skeleton Skeleton::open(const LoadConfig& cfg)
{
    requireKernel(); // a clear line, not a verifier error
    if (cfg.queues == 0 || cfg.queues > NPF_MAX_QUEUES)
        throwErrno(EINVAL, "npf_xdp: " + std::to_string(cfg.queues) + " queues (must be 1 .. " +
                               std::to_string(NPF_MAX_QUEUES) + ")");
    Skeleton s;
    s.cfg_ = cfg;
    s.skel_.reset(npf_xdp__open());
    if (!s.skel_)
        throwErrno("open BPF object npf_xdp");
    checkNeg(bpf_map__set_max_entries(s.skel_->maps.npf_xsks, s.cfg_.queues * 2), "size npf_xsks");
    s.skel_->rodata->npf_chain = cfg.chain ? 1 : 0;
    bpf_program* p = s.skel_->progs.npf_xdp;
    if (cfg.frags)
        checkNeg(bpf_program__set_flags(p, bpf_program__flags(p) | BPF_F_XDP_HAS_FRAGS), "make npf_xdp frags-aware");
    checkNeg(bpf_program__set_expected_attach_type(p, static_cast<bpf_attach_type>(cfg.attachType)),
             "set npf_xdp's expected attach type");
    return s;
}

int Skeleton::regionsFd(uint32_t cls) const
{
    bpf_map* maps[] = {skel_->maps.npf_regions_0, skel_->maps.npf_regions_1, skel_->maps.npf_regions_2,
                       skel_->maps.npf_regions_3, skel_->maps.npf_regions_4};
    static_assert(std::size(maps) == NPF_BITMAP_CLASSES);
    if (cls >= NPF_BITMAP_CLASSES)
        throwErrno(EINVAL, "bitmap size class " + std::to_string(cls));
    return bpf_map__fd(maps[cls]);
}

void Skeleton::load()
{
    const int rc = npf_xdp__load(skel_.get());
    // The verifier checks a program loaded without CAP_PERFMON under the
    // unprivileged rules (no pointer comparisons, Spectre masking): EACCES.
    checkNeg(rc, std::string("load BPF program npf_xdp (") +
                     (rc == -EPERM || rc == -EACCES ? "needs CAP_BPF and CAP_PERFMON, and CAP_NET_ADMIN for XDP; "
                                                    : "") +
                     "run with -v for the verifier log)");
}

} // namespace npf::dataplane
