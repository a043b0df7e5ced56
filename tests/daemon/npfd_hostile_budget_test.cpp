// Posted buffers against the resident budget (issue 40, attack 2), through
// npfd, each beside a victim of another rule receiving byte for byte:
//
//   - one post that spans a client's whole region and is never consumed: an
//     npfd that protects every page a post covers from eviction holds the
//     whole region resident, whatever its budget;
//   - the well-meaning side of the same rule: 512 buffers, each on its own
//     64 KiB slot of a 32 MiB region under a 1 MiB budget, reposted as they
//     complete (a Python program through the C API received 4,593 of 20,000
//     datagrams that way, then nothing, with no error).
//
// Posted buffers may protect what eviction leaves resident, no more; a
// buffer left out is counted (region.protect_capped) and its datagram takes
// the fault path if its page was evicted meanwhile.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "hostile_client.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

constexpr uint64_t kRegion = 32 << 20, kBudget = 1 << 20, kSlot = 64 << 10;
constexpr uint32_t kBuffers = 512, kBytes = 1200;

// The region's counters npfd reports to its client.
ipc::Json clientStats(Hostile& h) { return h.ch.call(ipc::StatsRequest{}).reply.stats; }
uint64_t residentPages(Hostile& h) { return clientStats(h)["counters"]["resident_pages"].get<uint64_t>(); }
uint64_t protectCapped(Hostile& h) { return clientStats(h)["region"]["protect_capped"].get<uint64_t>(); }

// What the client's memory holds: the memfd's allocated bytes.
uint64_t allocatedBytes(const Hostile& h)
{
    struct stat st{};
    return ::fstat(h.memfd.get(), &st) == 0 ? uint64_t(st.st_blocks) * 512 : 0;
}

// `n` datagrams of kBytes to flow `f` on `port`, into kBuffers buffers on
// slots kSlot apart, each posted again as its datagram completes (the
// sender stays within the buffers posted). *ok: completions OK.
::testing::AssertionResult receiveReposting(Rig& rig, HostileFlow& f, uint16_t port, uint32_t sender, uint32_t n,
                                            uint64_t* ok)
{
    std::vector<npf_completion> got;
    uint64_t done = 0;
    *ok = 0;
    for (uint32_t i = 0; i < kBuffers; i++)
        f.post(i * kSlot, 2048);
    f.publish();
    auto reap = [&] {
        got.clear();
        f.take(got);
        for (const npf_completion& c : got) {
            *ok += c.status == NPF_CS_OK;
            f.post(c.offset, 2048); // the buffer, again
        }
        done += got.size();
        if (!got.empty())
            f.publish();
        return done;
    };
    {
        Sender tx(rig.veth(), {.sender = sender, .count = n, .dstPort = port, .size = [](uint32_t) { return kBytes; }});
        tx.flowControl(kBuffers, reap);
        tx.start();
        tx.join();
        if (!tx.error().empty())
            return ::testing::AssertionFailure() << "sender: " << tx.error();
    }
    if (!test::waitUntil([&] { return reap() >= n; }))
        return ::testing::AssertionFailure() << "the flow completed " << done << " of " << n
                                             << " datagrams, then nothing more";
    return ::testing::AssertionSuccess();
}

// After the traffic the region is back within its budget (eviction runs at
// the end of each install), in npfd's books and in the client's memory.
::testing::AssertionResult withinBudget(Hostile& h)
{
    const uint64_t pages = kBudget / 4096;
    if (!test::waitUntil([&] { return residentPages(h) <= pages; }))
        return ::testing::AssertionFailure() << residentPages(h) << " pages resident, the budget is " << pages;
    // npfd's count is of pages it installed; the memfd says what is held.
    if (allocatedBytes(h) > kBudget)
        return ::testing::AssertionFailure() << "the client's memfd holds " << allocatedBytes(h)
                                             << " bytes, the budget is " << kBudget;
    return ::testing::AssertionSuccess();
}

class NpfdHostileBudget : public EngineE2E {};

// Flow a holds one post over the whole region and receives nothing; flow b
// receives datagrams into 512 pages, twice the budget. The spanning post is
// left unprotected (counted), and the region stays within its budget.
TEST_F(NpfdHostileBudget, OnePostOverTheWholeRegionDoesNotHoldItResident)
{
    underAttack("a post over the whole region", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        Hostile h(npfd, "spanning-post");
        h.region(kRegion, kBudget);
        HostileFlow holder = h.openFlow(kFirstPort + 80);
        holder.post(0, uint32_t(kRegion));
        holder.publish();
        HostileFlow f = h.openFlow(kFirstPort + 81);
        uint64_t ok = 0;
        if (auto r = receiveReposting(rig, f, kFirstPort + 81, 31, 2 * kBuffers, &ok); !r)
            return r;
        during();
        if (ok != 2 * kBuffers)
            return ::testing::AssertionFailure() << ok << " of " << 2 * kBuffers << " completions OK";
        if (auto r = withinBudget(h); !r)
            return r;
        if (protectCapped(h) == 0)
            return ::testing::AssertionFailure() << "the post over the whole region was protected (protect_capped 0)";
        return h.leave();
    });
}

// The C API user's shape: 20,000 datagrams into 512 reposted buffers on
// their own pages, twice the budget. Every one completes OK, and the region
// stays within its budget.
TEST_F(NpfdHostileBudget, MoreBuffersThanTheBudgetHoldsStillReceiveEverything)
{
    underAttack("more buffers than the budget", {}, [](Rig& rig, Npfd& npfd, const During& during) {
        constexpr uint32_t kN = 20000;
        Hostile h(npfd, "many-buffers");
        h.region(kRegion, kBudget);
        HostileFlow f = h.openFlow(kFirstPort + 82);
        uint64_t ok = 0;
        if (auto r = receiveReposting(rig, f, kFirstPort + 82, 32, kN, &ok); !r)
            return r;
        during();
        if (ok != kN)
            return ::testing::AssertionFailure() << ok << " of " << kN << " completions OK";
        if (auto r = withinBudget(h); !r)
            return r;
        if (protectCapped(h) == 0)
            return ::testing::AssertionFailure() << "512 buffers on 512 pages all protected under a 256-page budget";
        return h.leave();
    });
}

} // namespace
} // namespace npf::e2e
