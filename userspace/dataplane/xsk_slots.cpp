#include "dataplane/xsk_slots.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <memory>

#include "dataplane/dataplane.h"
#include "dataplane/lib_log.h"
#include "npf/abi.h"
#include "npf_xsk_probe.skel.h"
#include "sys/error.h"

namespace npf::dataplane {

std::vector<XskSlot> xskSlots(const Dataplane& dp)
{
    struct Destroy {
        void operator()(npf_xsk_probe* s) const noexcept { npf_xsk_probe__destroy(s); }
    };
    std::string what = "probe npf_xsks of " + dp.ifname();
    LibLogCapture quiet;
    std::unique_ptr<npf_xsk_probe, Destroy> skel(npf_xsk_probe__open());
    if (!skel)
        throwErrno(what + ": open probe");
    uint32_t slots = std::min<uint32_t>(dp.queues() * 2, NPF_MAX_QUEUES * 2);
    skel->rodata->npf_probe_slots = slots;
    checkNeg(bpf_map__reuse_fd(skel->maps.npf_xsks, dp.xsks()), what + ": reuse pinned map");
    if (int err = npf_xsk_probe__load(skel.get())) {
        quiet.replayWarnings();
        throwErrno(-err, what + ": load probe");
    }
    unsigned char pkt[64] = {};
    LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = pkt, .data_size_in = sizeof(pkt), .repeat = 1);
    checkNeg(bpf_prog_test_run_opts(bpf_program__fd(skel->progs.npf_xsk_probe), &run), what + ": test run");

    std::vector<XskSlot> out;
    for (uint32_t i = 0; i < slots; ++i)
        if (uint32_t v = skel->bss->npf_probe_out[i])
            out.push_back({i, v - 1});
    return out;
}

std::vector<uint32_t> slotQueues(const std::vector<XskSlot>& slots)
{
    std::vector<uint32_t> q;
    for (const XskSlot& s : slots)
        q.push_back(s.slot / 2);
    std::sort(q.begin(), q.end());
    q.erase(std::unique(q.begin(), q.end()), q.end());
    return q;
}

} // namespace npf::dataplane
