// RAII owner of the npf_xdp BPF skeleton (open -> configure -> load -> destroy).
#pragma once

#include <cstdint>
#include <memory>

#include <linux/bpf.h>

#include "npf/abi.h"
#include "npf_xdp.skel.h"

namespace npf::dataplane {

// What the program is sized for at load time.
struct LoadConfig {
    uint32_t queues = NPF_MAX_QUEUES;                // RX queues with socket slots, 1..NPF_MAX_QUEUES
    // Frags-aware (BPF_F_XDP_HAS_FRAGS: packets larger than one buffer).
    // false to chain a program that is not (npf_next takes only its owner's
    // kind): then a driver may refuse native mode above an MTU of about a page.
    bool frags = true;
    // npf_xdp's expected_attach_type: BPF_XDP (libbpf's SEC("xdp")), or what
    // the chained program has (a program array takes one kind only).
    uint32_t attachType = BPF_XDP;
    // npf_xdp tail-calls npf_next (a chained program). Off, the verifier
    // drops the call: nothing is chained then, and the pass path is cheaper.
    bool chain = false;
};

class Skeleton {
public:
    // Opens the embedded object and applies cfg (rodata + map sizes). Not loaded yet.
    static Skeleton open(const LoadConfig& cfg);

    // Verifies and loads into the kernel; throws with the verifier's reason.
    void load();

    npf_xdp* get() const noexcept { return skel_.get(); }
    npf_xdp* operator->() const noexcept { return skel_.get(); }
    const LoadConfig& config() const noexcept { return cfg_; }

    // The npf_regions_<cls> outer map's fd (bitmaps of size class cls).
    int regionsFd(uint32_t cls) const;

private:
    struct Destroy {
        void operator()(npf_xdp* s) const noexcept { npf_xdp__destroy(s); }
    };
    std::unique_ptr<npf_xdp, Destroy> skel_;
    LoadConfig cfg_;
};

} // namespace npf::dataplane
