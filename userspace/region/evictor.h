// Eviction: clock victims -> clear resident bits -> grace period -> write-
// protect fence -> save (unless released) -> punch hole -> account -> lift
// the fence -> victims that failed stay resident.
//
// The grace period covers fast-path workers that saw a bit set before it was
// cleared. The write-protect fence covers every other writer (the
// application, a client writing its own mapping, a worker that skipped the
// protocol): from the fence until the hole is punched writes block in a WP
// fault, and after the fence is lifted they retry, fault MISSING and get the
// saved content, so no write is lost between save and punch. With client
// memory the fence goes up on both mappings, ours and (through the client's
// uffd, at its addresses) the client's; the punch removes the page from both.
//
// Called with its region's lock held; it allocates nothing once built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "region/region_parts.h"

namespace npf {

class PageIo;
class PageState;
class SpillFile;

class Evictor {
public:
    // What eviction asks of the region it works for.
    class Host {
    public:
        // Returns true once no fast-path writer can still be writing a page
        // whose resident bit it saw set before the call; serves faults
        // meanwhile. False if that took longer than its bound: a writer may
        // still be writing them.
        virtual bool waitGrace() noexcept = 0;
        // Write-protects pages [page, page + n) in every mapping the fence
        // covers; 0 or -errno. 0 and nothing done if the region has no fence.
        virtual int raiseFence(uint64_t page, uint64_t n) noexcept = 0;
        // Lifts it and wakes the writers it blocked.
        virtual void liftFence(uint64_t page, uint64_t n) noexcept = 0;

    protected:
        ~Host() = default;
    };

    // Evicts at most batchPages pages per batch. Keeps references: the
    // region's parts, filled in before the first eviction.
    Evictor(const RegionParts& parts, Host& host, uint32_t batchPages);

    // Evicts in batches until at most targetResident pages are resident, but
    // no more than were over it at the call; ignoreReferenced: no second
    // chance. Returns pages evicted, or -errno if none could be.
    int evictTo(uint64_t targetResident, bool ignoreReferenced) noexcept;

private:
    // One batch of up to `want` (<= batchPages) victims; returns pages
    // evicted, 0 if the clock offered none, -EIO if every one failed.
    int evictBatch(uint32_t want, bool ignoreReferenced) noexcept;
    // The steps of a batch over victims_[0, n_).
    void decideSaves() noexcept;
    void fence() noexcept;
    void save() noexcept;
    void punch() noexcept;
    int account() noexcept;
    void liftFence() noexcept;
    void keepFailed() noexcept;
    // Victims [k, k + n) stay resident: counted, logged.
    void fail(size_t k, size_t n, int err, const char* what) noexcept;
    // Calls f(first index, count) for each run of consecutive victims whose
    // indices satisfy pred.
    template <typename Pred, typename F>
    void forRuns(Pred pred, F f);

    PageState& state_;
    const PageIo& io_;
    const SpillFile& spill_;
    RegionCounters& c_;
    Host& host_;
    const std::string& name_;

    // The current batch, sized to batchPages at construction.
    std::vector<uint64_t> victims_; // sorted
    std::vector<uint8_t> save_;     // save_[k]: victim k's content is kept (saved, fenced)
    std::vector<uint8_t> failed_;   // failed_[k]: victim k stays resident (fence, save or punch failed)
    size_t n_ = 0;
    bool failedAny_ = false;
};

} // namespace npf
