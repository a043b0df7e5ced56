// The engine's side of one open flow, shared by every engine thread:
//   workers, pager  claim() and complete() seqs (the sequencer is thread-safe),
//                   read the posts of claimed seqs
//   any of them     publish() completions (serialised by publishMu_)
//   pager           settles claims: sampled (its own), settled (read by publishers)
// The application's side (posting, polling) is Flow::Impl (flow_impl.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "dataplane/flow_ring.h"
#include "dataplane/flows.h"
#include "dataplane/post_ring.h"
#include "engine/credits.h"
#include "npf/abi.h"
#include "npf/counters.h"
#include "order/completion_ring.h"
#include "order/sequencer.h"
#include "sys/tally.h"

namespace npf {

class Region;

// The engine's counters as a thread counts them: each worker and pager has
// its own, Service::stats adds them up.
using EngineTally = Tally<kEngineCounters>;

class ServedFlow {
public:
    // The flow receives into `region`; its sequencer starts at the ring's cons.
    ServedFlow(dataplane::EngineFlow flow, const dataplane::FlowSpec& spec, Region& region,
               std::chrono::nanoseconds reorderTimeout, uint32_t completionRingSize, const CreditSetup& credits);
    ServedFlow(const ServedFlow&) = delete;
    ServedFlow& operator=(const ServedFlow&) = delete;

    // Claims the packet's seq and checks it against the posted buffer: true
    // and *seq, or false when the frame must be dropped (counted; a mismatch
    // completes the seq LOST so the flow never stalls on it).
    bool claim(const npf_meta& m, uint64_t* seq, EngineTally& c) noexcept;
    // Completes every ready seq in order into the completion ring.
    void publish(uint64_t nowNs) noexcept;
    // Wakes the application blocked in Flow::wait (the engine stopped).
    void wakeApplication() noexcept { producer_.wake(); }

    // An npfd client's flow: the client's posts cannot protect their pages
    // from eviction (Region::protect is the daemon's), so the pager does it
    // for them, one round behind: pages of buffers posted and not yet
    // published are protected, those of published ones released. Pager
    // thread only; releaseProtection() once no engine thread holds the flow.
    void syncProtection() noexcept;
    void releaseProtection() noexcept;

    const uint32_t id;
    const uint32_t gen; // of the id when this flow took it: npf_meta.gen must match
    const dataplane::FlowSpec spec;
    const bool ownsEntry; // the engine added the npf_flows entry (and removes it)
    const dataplane::FlowRing ringMap; // the post ring map, mapped (shared with XDP and the application)
    Region& region;              // where its datagrams land
    const uint64_t regionSize;
    npf_cursor* const cursor;
    const dataplane::PostReader posts;
    const dataplane::FlowXdpStats xdpAtOpen; // the flow's XDP counts when this engine took it
    Sequencer seq;
    CompletionRing ring; // the shared memory; Flow::Impl consumes it
    const std::unique_ptr<FlowCredits> credits; // opened with credits; else nullptr

    // Seqs below `settled` were claimed by XDP, an RCU grace period has
    // passed since, and every RX ring has released what it held after it:
    // one of them still missing was dropped, so it may complete LOST (see
    // ClaimSettler, claim_settler.h). (Using cons itself would time out datagrams that
    // are merely in flight between XDP and a ring, or queued behind a busy CPU.)
    std::atomic<uint64_t> settled;
    uint64_t sampled; // pager only: cons read before the grace period started
    std::atomic<bool> faulted{false}; // the pager should prefetch ahead of this flow
    // Prefetcher only (the owning pager): what is left of the window the
    // last fault asked for, as region ranges, installed a slice a round;
    // prefetchRuns[prefetchNext..] are still to go. Each range is gone
    // through once, so a window larger than the budget (eviction takes back
    // what the slice before installed) ends all the same.
    std::vector<std::pair<uint64_t, uint64_t>> prefetchRuns;
    size_t prefetchNext = 0;

private:
    // syncProtection's state: seqs below protectedTo were looked at; slot
    // s & kMask holds the range protected for seq s (len 0: none), as it was
    // protected (the client may rewrite the slot meanwhile).
    struct Protected {
        uint64_t offset;
        uint32_t len;
    };
    uint64_t protectedTo_ = 0, releasedTo_ = 0;
    std::unique_ptr<Protected[]> protected_;
    std::mutex publishMu_;
    CompletionProducer producer_; // under publishMu_
};

inline uint16_t statusOf(const npf_meta& m) noexcept
{
    return (m.flags & NPF_META_F_TRUNCATED) ? NPF_CS_TRUNCATED : NPF_CS_OK;
}

inline bool ServedFlow::claim(const npf_meta& m, uint64_t* s, EngineTally& c) noexcept
{
    // A frame claimed for an earlier flow under this id: not ours to place.
    if (m.gen != static_cast<uint16_t>(gen)) {
        c.add<&EngineStats::rejected>();
        return false;
    }
    // XDP bounds every descriptor by the flow's region; the region is the
    // last word (it may be another process's, npfd's clients).
    if (m.offset > regionSize || m.len > regionSize - m.offset) {
        c.add<&EngineStats::rejected>();
        return false;
    }
    const Sequencer::Claim cl = seq.claim(m.seq);
    if (cl.rc) {
        c.add<&EngineStats::rejected>();
        return false;
    }
    const dataplane::Post p = posts.slot(cl.seq);
    if (p.offset != m.offset || m.len > p.len) {
        c.add<&EngineStats::mismatch>();
        seq.complete(cl.seq, 0, NPF_CS_LOST, 0);
        return false;
    }
    *s = cl.seq;
    return true;
}

} // namespace npf
