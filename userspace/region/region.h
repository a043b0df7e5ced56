// The pageable region: a memfd (shmem) mapping registered with userfaultfd in
// MISSING mode (and WP, used to fence writers during eviction), plus the
// pager operations that own residency: packet patches, CPU faults, prefetch,
// protection of posted buffers, release, and eviction under a budget.
//
// An in-process region may instead be private anonymous memory
// (RegionConfig::backing): pages copied in (UFFDIO_COPY) and freed
// (MADV_DONTNEED), or moved in from a pool of recycled pages and back out
// (PagePool), so that no page is allocated or freed in the steady state.
//
// The memory is the region's own memfd, or a client's (npfd): the client
// created and mapped it, registered its mapping with its own userfaultfd and
// passed both fds (ClientMemory). The region then maps the memfd itself,
// registered with its own uffd as always (user-mode only there: openUffd in
// region.cpp says why that is enough), and also serves the client's faults
// and fences the client's mapping during eviction (region_client.cpp).
//
// Threading: pager operations (applyPatches, serviceFaults,
// serviceClientFaults, prefetch, release, evict*) take an internal mutex and
// may be called from any thread, but the engine calls them from its single
// pager thread. protect/unprotect, markReferenced, isResident and stats are
// lock-free. A thread that writes the region on the fast path must be an
// EpochDomain reader: enter(), check isResident() for the destination, write,
// markReferenced(), exit(); a failed check means the payload goes to the pager.
// Never call evict* from inside a reader section.
//
// The pager never touches a page through the mapping unless it knows the
// page is present, so it never faults on itself. A client can punch holes in
// its memfd behind that knowledge, so with client memory the pager reads and
// writes pages through the memfd (pread/pwrite) instead.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "npf/abi.h"
#include "region/batch_timing.h"
#include "region/client_installer.h"
#include "region/continue_installer.h"
#include "region/copy_installer.h"
#include "region/epoch.h"
#include "region/evictor.h"
#include "region/geometry.h"
#include "region/page_io.h"
#include "region/page_pool.h"
#include "region/page_reserve.h"
#include "region/page_state.h"
#include "region/patch_plan.h"
#include "region/region_stats.h"
#include "region/remote_installer.h"
#include "region/spill.h"
#include "region/uffd.h"
#include "sys/clock.h"
#include "sys/fault_guard.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"
#include "sys/ticket_lock.h"

namespace npf {

// Where an in-process region's pages live (docs/architecture.md, "Where a
// region's pages come from").
enum class RegionBacking {
    Memfd,     // a memfd: shmem (UFFDIO_COPY in, punched out), or hugetlbfs for 2 MiB pages
    Anonymous, // private anonymous memory, 4 KiB pages: UFFDIO_COPY in, MADV_DONTNEED out
    // Private anonymous memory and a page pool (PagePool): pages moved in
    // and out with UFFDIO_MOVE (Linux 6.8; without it they are copied in and
    // freed). 2 MiB pages are then transparent huge pages, not hugetlbfs.
    Pool,
};

struct RegionConfig {
    uint64_t size = 1ull << 30;        // bytes, a multiple of pageSize
    // NPF_PAGE_SIZE or kHugePageSize: the unit of residency, installs,
    // eviction, spill, prefetch and protection. The resident bitmap XDP reads
    // stays at 4 KiB granularity whatever it is (a 2 MiB page sets 512 bits),
    // so XDP and the ABI do not change with it.
    uint64_t pageSize = NPF_PAGE_SIZE;
    uint64_t residentBudget = 0;       // bytes; 0 = unlimited
    // One bit per 4 KiB page (ceil(size / 4096 / 64) words), shared with XDP
    // (the mmapped npf_resident array). Cleared when the region is created and destroyed,
    // so it must outlive the region. nullptr: the region allocates its own.
    uint64_t* residentBitmap = nullptr;
    EpochDomain* epochs = nullptr;     // fast-path writers to wait for; may be null
    std::string spillDir;              // "" = spill into a second memfd
    std::string name = "npf-region";
    uint32_t maxBatchPages = kDefaultBatchPages; // 4 KiB pages per UFFDIO_COPY and per eviction batch (at least one page)
    bool autoEvict = true;             // evict to budget at the end of each install call
    // The region's own userfaultfd handles the faults of user-mode accesses
    // only (UFFD_USER_MODE_ONLY): a process without the privilege for a full
    // one (npf::Client in delegated mode). A system call that reaches a page
    // that is not resident then fails with EFAULT instead of waiting for it.
    bool userModeOnly = false;
    // Write-protect victims between save and punch so that writers outside
    // the epoch protocol (the application) cannot lose a write. Off: only
    // epoch readers are safe against eviction. Ignored if the kernel lacks
    // uffd-wp on shmem.
    bool writeProtectFence = true;
    std::chrono::milliseconds graceWarn{50};  // warn when a grace period takes longer
    // Give a grace period up after this long (a writer held its epoch
    // section): the victims stay resident (grace_timeouts) and eviction tries
    // again at its next call. The pager that waits serves this region's
    // faults meanwhile, and every other region's writers cannot block on a
    // fault (a client's memory is guarded, see fastStore).
    std::chrono::milliseconds graceLimit{100};
    // Where the pages live (RegionBacking). Not for a client's memory, which
    // is always its memfd (shared between two processes).
    RegionBacking backing = RegionBacking::Memfd;
    uint32_t poolBatches = 4; // the pool's pages: this many install batches
    // Pages faulted in when the region is built and kept for its installs
    // (a reservation, as the kernel's huge page pool is for hugetlbfs), at
    // most the region's. Pool: the pool holds max(this, poolBatches
    // batches). Anonymous: a PageReserve, freed a run before each copy.
    // Memfd: ignored (the engine refuses it). 0: none.
    uint64_t reservePages = 0;
    // A client's memory with 4 KiB pages (npfd): pages are copied into the
    // client's mapping through its userfaultfd (ClientInstaller), so its
    // memory cgroup is charged, on a thread of the region's own that the
    // pager waits for this long at most; past it the pager installs through
    // its own mapping. 2 MiB pages with an install area: a thread of the
    // client copies them in (RemoteInstaller), so its hugetlb cgroup is
    // charged; the pager waits this long per page at most. 0: always
    // through our own mapping (npfd pays).
    std::chrono::microseconds clientInstallWait{1000};
    // After jobs into the client's mapping that took more than half of
    // clientInstallWait, or missed it, for longer than clientSlowForgiven
    // deadlines (earned back at 2 % of the time), the client's installer
    // gets no job for this long, doubling while its probes stay slow, to 32
    // times it (region/cool_down.h says why). 0: none, every run is offered
    // to the client (tests of late jobs, which need many of them).
    std::chrono::milliseconds clientCoolDown{100};
    uint32_t clientSlowForgiven = CoolDown::kForgiven;
};

// Memory a client process owns (npfd): it created the memfd, mapped it
// MAP_SHARED at `base` and registered that mapping with its own userfaultfd
// (MISSING, plus WP where the kernel has uffd-wp on shmem).
struct ClientMemory {
    // A shmem memfd created with MFD_ALLOW_SEALING, at least RegionConfig::size
    // bytes. The region seals it F_SEAL_SHRINK | F_SEAL_SEAL: a client that
    // shrank it would SIGBUS the daemon, and one that sealed it against writes
    // would stop eviction's hole punching.
    Fd memfd;
    Fd uffd;           // the client's userfaultfd; empty: its faults are not served
    uint64_t base = 0; // the client's address of region offset 0, page aligned
    // The client's spill file (saved content of evicted pages, at their
    // region offsets): what npfd evicted survives npfd. Empty: npfd's own.
    Fd spill;
    // 2 MiB pages: the client's install area (RemoteInstaller), through
    // which a thread of the client allocates its huge pages. Empty: npfd
    // allocates them.
    Fd installArea;
};

class Region : private Evictor::Host {
public:
    explicit Region(const RegionConfig& cfg);
    // Adopts a client's memory (see ClientMemory). Throws, closing the fds,
    // if the memfd is not a sealable shmem memfd of at least cfg.size bytes,
    // if `uffd` is not a userfaultfd, or if the client is already gone.
    Region(const RegionConfig& cfg, ClientMemory client);
    ~Region();
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;

    uint8_t* base() const noexcept { return map_.as<uint8_t>(); }
    const RegionGeometry& geometry() const noexcept { return geo_; }
    uint64_t size() const noexcept { return geo_.size; }
    uint64_t pages() const noexcept { return geo_.pages(); } // of pageSize()
    uint64_t pageSize() const noexcept { return uint64_t{1} << geo_.pageShift; }
    int uffdFd() const noexcept { return uffd_.fd(); } // poll for POLLIN, then serviceFaults()
    int memfd() const noexcept { return memfd_.get(); } // -1 on anonymous memory
    // Pages of the pool now, and its capacity (0 without one).
    uint64_t poolPages() const noexcept { return pool_.available(); }
    uint64_t poolCapacity() const noexcept { return pool_.capacity(); }
    // Where its pages come from and how they go in, in a word or three:
    // "anon-4k" (private anonymous memory, UFFDIO_COPY of a page the kernel
    // allocates, MADV_DONTNEED to evict), "pool-4k" / "pool-2m-thp" (the
    // same memory, UFFDIO_MOVE of the pool's recycled pages; "anon-2m-thp"
    // where the kernel cannot move them), "memfd-4k" (shmem, UFFDIO_COPY of a page
    // the kernel allocates), "hugetlbfs-2m" (from the huge page pool), and
    // "client-memfd-4k" / "client-hugetlbfs-2m" (an npfd client's memory).
    const char* route() const noexcept;
    const uint64_t* residentBitmap() const noexcept { return state_.residentBitmap(); }
    size_t residentBitmapWords() const noexcept { return PageState::bitmapWords(geo_.size); }
    bool writeProtectFence() const noexcept { return wp_; }
    uint64_t budgetPages() const noexcept { return geo_.budgetPages; }

    // The client side (a region built from ClientMemory). Any failed ioctl on
    // the client's uffd means the client is gone (it exited, or broke the
    // protocol): counted, logged once, never served again; the owner destroys
    // the region.
    bool adopted() const noexcept { return adopted_; }
    // Poll for POLLIN, then serviceClientFaults(); -1 without a client uffd.
    int clientUffdFd() const noexcept { return clientUffd_.fd(); }
    uint64_t clientBase() const noexcept { return clientBase_; }
    // The write-protect fence covers the client's mapping too (its mapping
    // is registered for WP); otherwise the client's own writes racing an
    // eviction can be lost.
    bool clientWriteProtect() const noexcept { return clientWp_; }
    bool clientGone() const noexcept { return clientGone_.load(std::memory_order_acquire); }
    // Asks the kernel whether the client still exists (one ioctl); false once
    // it is gone, or without a client uffd.
    bool checkClient() noexcept;
    // Pages are installed into the client's mapping (it is charged for them)
    // whenever its installer keeps up (RegionConfig::clientInstallWait).
    bool installsThroughClient() const noexcept { return clientInstaller_ || remoteInstaller_; }

    // True if every page of [offset, offset + len) has its resident bit set.
    bool isResident(uint64_t offset, uint64_t len) const noexcept { return state_.isResident(offset, len); }
    // Marks pages recently written: a second chance for the clock, and the
    // end of a release() (the page holds new data). Call it inside the epoch
    // section that wrote them.
    void markReferenced(uint64_t offset, uint64_t len) noexcept { state_.markReferenced(offset, len); }

    // A fast-path writer's copy into [offset, offset + len) of a resident
    // destination: runs fn(), which writes it through base(), and returns
    // true. With a client's memory (npfd) the client can take a page away
    // behind the resident bit (it punches its memfd), and a page its own
    // thread installed is not in our mapping until we map it: our mapping's
    // userfaultfd is in SIGBUS mode, so such a store raises SIGBUS instead of
    // waiting for a pager that may be waiting for this very writer's epoch
    // (a grace period of another region), and the copy is guarded
    // (sys/fault_guard.h). A 2 MiB page in the page cache but not in our
    // mapping is mapped (UFFDIO_CONTINUE allocates nothing) and the copy runs
    // once more. Else false, counted (fast_path_faults): the caller hands the
    // datagram to the pager, which finds the page gone and installs it
    // again. The page's resident bits are cleared at once, so that XDP
    // steers its next datagrams to the backup ring rather than a worker
    // faulting on each (the pager sets them again once the page is back).
    template <class Fn>
    bool fastStore(uint64_t offset, uint64_t len, Fn&& fn) noexcept
    {
        if (!adopted_) {
            fn();
            return true;
        }
        uintptr_t at = 0;
        if (guarded(base() + offset, len, fn, &at))
            return true;
        if (mapFaulted(at) && guarded(base() + offset, len, fn))
            return true;
        fastStoreFaulted(at);
        return false;
    }

    // Places payloads. results[i] (size >= patches.size()) gets 0 when patch i
    // is in place, else -errno (-EINVAL out of bounds). Returns the number in
    // place, or -errno if nothing could be attempted.
    int applyPatches(std::span<const Patch> patches, std::span<int> results, BatchTiming* t = nullptr) noexcept;
    // Serves pending CPU faults without blocking; returns events served or -errno.
    int serviceFaults(BatchTiming* t = nullptr) noexcept;
    // Serves pending faults of the client's mapping without blocking: the
    // page goes in through the region's own uffd, then the client is woken.
    // Returns events served, or -ENOTCONN without a client uffd or once the
    // client is gone (then stop polling clientUffdFd()).
    int serviceClientFaults(BatchTiming* t = nullptr) noexcept;
    // Installs the missing pages of [offset, offset + len); returns pages installed or -errno.
    int prefetch(uint64_t offset, uint64_t len) noexcept;

    // Refcounts pages of posted-but-unfilled buffers; eviction skips them.
    // protect() also cancels release() of those pages (new content is
    // coming). Bounded by the budget: a buffer whose protection would hold
    // more pages than eviction leaves resident is not protected (false,
    // counted in protect_capped; unprotect() it all the same or not at all):
    // its pages may be evicted before its datagram comes, and the fault
    // path places it then.
    bool protect(uint64_t offset, uint64_t len) noexcept;
    // Pages a posted buffer protects now, and at most (0: no budget, no bound).
    uint64_t protectedPages() const noexcept { return state_.protectedPages(); }
    uint64_t protectLimit() const noexcept { return geo_.budgetPages ? evictTarget() : 0; }
    void unprotect(uint64_t offset, uint64_t len) noexcept { state_.unprotect(offset, len); }
    uint32_t protectCount(uint64_t page) const noexcept { return state_.protectCount(page); }

    // Content of the pages fully inside [offset, offset + len) is no longer
    // needed: they are not saved on eviction and come back zeroed. A page
    // written again before its eviction is saved after all: the pager's
    // patches, protect() and a fast-path writer's markReferenced() cancel the
    // release, and eviction decides after its grace period.
    int release(uint64_t offset, uint64_t len) noexcept;

    // Evicts down to the budget (minus some slack); returns pages evicted or -errno.
    int evictToBudget() noexcept;
    // Evicts every page that was resident at the call and is not protected
    // (pages faulted in meanwhile stay); returns pages evicted or -errno
    // (-ETIMEDOUT: a fast-path writer held its epoch section through 20
    // grace periods in a row).
    int evictAll() noexcept;

    uint64_t residentPages() const noexcept { return state_.residentPages(); } // of pageSize()
    RegionStats stats() const noexcept;

private:
    Region(const RegionConfig& cfg, ClientMemory* client);
    void mapMemfd(ClientMemory* client);
    // The constructor's steps (region.cpp): uffd registration, the pool or
    // reserve, a client's uffd and installers.
    void registerRanges(bool client, bool anon);
    void makePageSource(bool anon);
    void adoptClient(ClientMemory& client);
    // applyPatches' steps: a present page written in place; a missing one listed to install.
    bool patchPresent(uint64_t page, size_t b, size_t e, std::span<int> results) noexcept;
    void queueInstall(uint64_t page, size_t b, size_t e, std::span<int> results) noexcept;
    // region_client.cpp: checks and seals the client's memfd, adopts its uffd.
    void adoptMemfd(Fd memfd);
    void adoptClientUffd(Fd uffd, uint64_t base);
    int serviceClientFaultsLocked(BatchTiming* t) noexcept;
    int fenceClient(uint64_t page, uint64_t n, bool wp) noexcept;
    void wakeClient(uint64_t page, uint64_t n) noexcept;
    void clientFailed(int err, const char* what) noexcept;
    void fastStoreFaulted(uintptr_t at) noexcept;
    // A present page of a client's that it punched: not present from now on.
    void vanished(uint64_t page) noexcept;
    // 2 MiB pages of a client: maps the page that holds our address `at`
    // into our mapping if it is in the page cache (UFFDIO_CONTINUE: a page
    // the client's thread installed); true if it did.
    bool mapFaulted(uintptr_t at) noexcept;
    // The page of our mapping that holds address `at`, if the region does.
    std::optional<uint64_t> pageAt(uintptr_t at) const noexcept;
    uint8_t* clientAddr(uint64_t page) const noexcept
    {
        return reinterpret_cast<uint8_t*>(clientBase_ + (page << geo_.pageShift));
    }

    // Installs missing pages (sorted, unique), picking the primitive per
    // page: copy_, or continue_ for a 2 MiB page with no saved content.
    void installPages(const InstallBatch& b, BatchTiming* t) noexcept;
    // prefetch's parts: 2 MiB pages allocated outside the lock (held: the
    // pages to unhold after the install), then the install under it.
    static constexpr size_t kPreallocMax = 8;
    size_t preallocate(uint64_t first, uint64_t last, std::span<uint64_t> held) noexcept;
    int prefetchLocked(uint64_t first, uint64_t last) noexcept;
    // Installs the pages in scratchPages_ (sorted and deduplicated here) that
    // faulted; scratchStatus_[k] gets 0 or -errno. -ENOMEM if nothing was tried.
    int installFaulted(BatchTiming* t) noexcept;
    bool refill(uint64_t page) noexcept;
    int serviceFaultsLocked(BatchTiming* t) noexcept;
    void autoEvictLocked() noexcept;
    int evictToBudgetLocked() noexcept; // evictToBudget() with the lock held
    uint64_t evictTarget() const noexcept; // what evictToBudget() leaves resident (a budget set)
    // Evictor::Host (region_evict.cpp).
    bool waitGrace() noexcept override;
    int raiseFence(uint64_t page, uint64_t n) noexcept override;
    void liftFence(uint64_t page, uint64_t n) noexcept override;
    uint8_t* pageAddr(uint64_t page) const noexcept { return io_.addr(page); }
    uint64_t bytes(uint64_t pages) const noexcept { return pages << geo_.pageShift; }

    RegionConfig cfg_;
    const RegionGeometry geo_;
    bool wp_ = false;
    bool adopted_ = false;              // the memfd is a client's
    bool clientWp_ = false;             // fence the client's mapping too
    uint64_t clientBase_ = 0;
    std::atomic<bool> clientGone_{false};

    // Teardown order (reverse): the resident bits (state_), the client's uffd
    // and ours (each wakes and unregisters when it is the last reference),
    // then the mapping, then the memfd.
    Fd memfd_;
    MmapArea map_;
    // The memfd mapped again (2 MiB pages: continue_'s writes; a client's
    // memory: all our writes, registered MISSING in SIGBUS mode: PageIo).
    MmapArea alias_;
    bool hugetlb_ = false; // 2 MiB pages of a hugetlbfs memfd
    Userfaultfd uffd_;
    Userfaultfd clientUffd_;
    std::unique_ptr<ClientInstaller> clientInstaller_;
    std::unique_ptr<RemoteInstaller> remoteInstaller_;
    SpillFile spill_;
    PageState state_;
    MmapArea staging_;                  // geo_.batchPages page images
    PatchPlan plan_;
    PageIo io_;
    std::unique_ptr<RegionCounters> c_;
    PagePool pool_;
    PageReserve reserve_; // Anonymous with reservePages

    // Built in the initializer list with references to the parts above,
    // which the constructor's body fills in.
    const RegionParts parts_;
    CopyInstaller copy_;
    ContinueInstaller continue_;
    Evictor evictor_;

    std::vector<uint64_t> scratchPages_;
    std::vector<size_t> scratchBegin_, scratchEnd_;
    std::vector<int> scratchStatus_;
    std::vector<uffd_msg> msgs_;
    TicketLock mu_;
};

} // namespace npf
