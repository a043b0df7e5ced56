#include "region/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "region/nothrow_alloc.h"
#include "region/routes.h"
#include "sys/error.h"
#include "sys/log.h"

// <sys/mman.h> of Debian 12's glibc lacks the memfd huge page size flags.
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26) // MFD_HUGE_SHIFT 26
#endif

namespace npf {

namespace {

constexpr uint64_t kPage = NPF_PAGE_SIZE;

std::string sizeStr(uint64_t b) { return std::to_string(b) + " bytes"; }

uint64_t hugePagesCount(const char* file)
{
    const std::string path = std::string("/sys/kernel/mm/hugepages/hugepages-2048kB/") + file;
    Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    char buf[32] = {};
    if (!f || ::read(f.get(), buf, sizeof(buf) - 1) <= 0)
        return 0;
    return std::strtoull(buf, nullptr, 10);
}

// A 2 MiB region takes its pages from the huge page pool as they are
// installed (MAP_NORESERVE: nothing is reserved up front). Fewer free than it
// may hold resident at once would fail installs later, so fail now, saying
// how to get them.
void checkHugePages(uint64_t need, const std::string& who)
{
    const uint64_t free = hugePagesCount("free_hugepages"), total = hugePagesCount("nr_hugepages");
    if (free >= need)
        return;
    throwErrno(ENOMEM, "region " + who + ": needs " + std::to_string(need) +
                           " free 2 MiB huge pages (its resident budget plus one batch), the kernel has " +
                           std::to_string(free) + " free of " + std::to_string(total) +
                           ": reserve more with `echo " + std::to_string(total - free + need) +
                           " > /proc/sys/vm/nr_hugepages` (or hugepages=N on the kernel command line)");
}

RegionGeometry checkedGeometry(const RegionConfig& cfg)
{
    RegionGeometry g;
    std::string why;
    if (RegionGeometry::check(cfg.size, cfg.pageSize, cfg.residentBudget, cfg.maxBatchPages, &g, &why) !=
        RegionGeometry::Error::None)
        throwErrno(EINVAL, "region " + cfg.name + ": " + why);
    return g;
}

// The region's own userfaultfd. Over a client's memory (npfd) it handles
// the faults of user-mode accesses only (UFFD_USER_MODE_ONLY), which any
// process may create: npfd needs neither CAP_SYS_PTRACE nor /dev/userfaultfd.
// Sufficient because the kernel never touches npfd's mapping of a client's
// region on npfd's behalf (a kernel access to a missing page would fail with
// EFAULT instead of faulting):
//  - page content moves through the memfd (PageIo: pread/pwrite of the page
//    cache, or the unregistered alias mapping for 2 MiB pages), and the spill
//    file is written from and read into staging, never from this mapping;
//  - UFFDIO_COPY copies from staging into it (the destination is filled by
//    the ioctl, not faulted in); UFFDIO_CONTINUE, _WAKE and _WRITEPROTECT and
//    fallocate touch no content through it;
//  - the workers' payload copies into it are user-mode stores, and npfd
//    makes no read(), recv(), write() or io_uring request with a buffer in
//    it.
// It is in SIGBUS mode (UFFD_FEATURE_SIGBUS): no access through it ever
// waits for a fault to be served. A worker's store into a page the client
// punched, or one its thread installed that is not mapped here yet, raises
// SIGBUS, which Region::fastStore catches (the datagram goes to the pager);
// the pager only ever reaches present pages through it, and only with
// ioctls. So no thread of npfd waits on a fault that only a pager can
// serve, while that pager waits for the thread (a grace period).
// An in-process region (npf::Engine) keeps a full userfaultfd: there the
// application's own system calls reach the region (npf-recv write()s
// completed buffers, an application may recv() into one), and they must
// fault and wait for the pager, not fail with EFAULT. docs/architecture.md,
// "userfaultfd without privilege".
Userfaultfd openUffd(bool huge, bool clientMemory, bool anonymous, bool userModeOnly, const std::string& who)
{
    const int flags = clientMemory || userModeOnly ? UFFD_USER_MODE_ONLY : 0;
    if (anonymous) // MISSING on anonymous memory is the base feature; WP and MOVE are newer
        return Userfaultfd::open(0, UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_MOVE, "region " + who, flags);
    return Userfaultfd::open(UFFD_FEATURE_MISSING_SHMEM |
                                 (huge ? UFFD_FEATURE_MISSING_HUGETLBFS | UFFD_FEATURE_MINOR_HUGETLBFS : 0) |
                                 (clientMemory ? UFFD_FEATURE_SIGBUS : 0),
                             UFFD_FEATURE_WP_HUGETLBFS_SHMEM, "region " + who, flags);
}

} // namespace

Region::Region(const RegionConfig& cfg) : Region(cfg, nullptr) {}

Region::Region(const RegionConfig& cfg, ClientMemory client) : Region(cfg, &client) {}

Region::Region(const RegionConfig& cfg, ClientMemory* client)
    : cfg_(cfg), geo_(checkedGeometry(cfg_)),
      c_(std::make_unique<RegionCounters>()),
      parts_{uffd_, io_, state_, spill_, plan_, *c_, cfg_.name}, copy_(parts_, staging_, pool_, reserve_, geo_.batchPages),
      continue_(parts_, alias_), evictor_(parts_, *this, geo_.batchPages)
{
    const std::string& who = cfg_.name;
    const bool huge = geo_.pageShift != NPF_PAGE_SHIFT;
    const bool anon = cfg_.backing != RegionBacking::Memfd && !client;
    if (huge && anon && cfg_.backing == RegionBacking::Anonymous)
        throwErrno(EINVAL, "region " + who + ": 2 MiB pages on anonymous memory come from a page pool "
                               "(RegionBacking::Pool): a 2 MiB UFFDIO_COPY would install 512 small pages");
    if (anon)
        map_ = mapAnonymous(geo_.size, bytes(1), "region " + who + " (" + sizeStr(geo_.size) + ")");
    else
        mapMemfd(client);
    uffd_ = openUffd(huge, client != nullptr, anon, cfg_.userModeOnly, who);
    // 2 MiB hugetlbfs pages are installed with UFFDIO_CONTINUE.
    hugetlb_ = huge && !anon;
    // The memfd mapped again: CONTINUE's writes for 2 MiB pages, and every
    // write of ours into a client's memory (PageIo).
    if (hugetlb_ || client) {
        alias_ = MmapArea::map(geo_.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd_.get(), 0,
                               "alias of region " + who);
    }
    registerRanges(client != nullptr, anon);
    makePageSource(anon);

    if (client && client->spill)
        spill_ = SpillFile::adopt(std::move(client->spill), geo_.size, "region " + who);
    else
        spill_ = SpillFile::open(geo_.size, cfg_.spillDir, who + "-spill");

    state_ = PageState(geo_.size, geo_.pageShift, cfg_.residentBitmap, who);
    // Posted buffers may hold what eviction leaves resident, no more: the
    // budget stays a budget, and eviction always finds a victim among the
    // pages datagrams land in.
    state_.limitProtection(evictTarget());

    staging_ = MmapArea::map(bytes(geo_.batchPages), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0,
                             "staging pages of " + who);
    std::memset(staging_.get(), 0, staging_.size());
    // With client memory, saves read through staging: free, as installs
    // hold the lock too.
    io_ = anon ? PageIo(base(), geo_.pageShift, &pool_)
               : PageIo(base(), geo_.pageShift, memfd_.get(), adopted_, staging_.as<uint8_t>(), alias_.as<uint8_t>());
    if (client && hugetlb_)
        io_.mapAliasWith(&uffd_);
    scratchPages_.reserve(4096);
    scratchBegin_.reserve(4096);
    scratchEnd_.reserve(4096);
    scratchStatus_.reserve(4096);
    msgs_.resize(64);
    if (client)
        adoptClient(*client);
    NPF_DEBUG("region %s: %llu pages of %s, budget %llu pages, pool %llu pages, write-protect fence %s%s%s",
              who.c_str(), static_cast<unsigned long long>(geo_.pages()), huge ? "2 MiB" : "4 KiB",
              static_cast<unsigned long long>(geo_.budgetPages), static_cast<unsigned long long>(pool_.capacity()),
              wp_ ? "on" : "off",
              !adopted_      ? ""
              : !clientUffd_ ? ", client memory (its faults not served)"
              : clientWp_    ? ", client memory, fence covers the client"
                             : ", client memory, client not fenced",
              clientInstaller_ ? ", installs into the client's mapping" : "");
}

// The region (and over a client's memory, its alias) registered with the
// userfaultfd: MISSING; MINOR too for 2 MiB hugetlbfs pages, so that a page
// in the page cache but not yet mapped here still faults; WP where the
// kernel has it and the fence is asked for.
void Region::registerRanges(bool client, bool anon)
{
    const std::string& who = cfg_.name;
    const uint64_t modes = UFFDIO_REGISTER_MODE_MISSING | (hugetlb_ ? UFFDIO_REGISTER_MODE_MINOR : 0);
    wp_ = cfg_.writeProtectFence &&
          (uffd_.features() & (anon ? UFFD_FEATURE_PAGEFAULT_FLAG_WP : UFFD_FEATURE_WP_HUGETLBFS_SHMEM));
    if (wp_) {
        try {
            uffd_.registerRange(base(), geo_.size, modes | UFFDIO_REGISTER_MODE_WP, "region " + who);
        } catch (const std::system_error& e) {
            NPF_WARN("region %s: write-protect registration refused (%s); eviction relies on grace periods only",
                     who.c_str(), e.what());
            wp_ = false;
        }
    }
    if (!wp_)
        uffd_.registerRange(base(), geo_.size, modes, "region " + who);
    // Over a client's memory the alias is registered MISSING (SIGBUS mode):
    // a write into a hole the client punched fails under the fault guard
    // instead of allocating a page. 2 MiB pages: MINOR too, so that a write
    // into a page of the page cache the alias does not map yet is mapped by
    // our own UFFDIO_CONTINUE (PageIo::write) rather than by the kernel's
    // fault path.
    if (client)
        uffd_.registerRange(alias_.get(), geo_.size, modes, "alias of region " + who);
}

// Where anonymous memory's pages come from besides the kernel's free lists
// at each install: the page pool (UFFDIO_MOVE), or a reserve.
void Region::makePageSource(bool anon)
{
    const std::string& who = cfg_.name;
    const bool pooled = anon && cfg_.backing == RegionBacking::Pool;
    const uint64_t reserve = std::min(cfg_.reservePages, geo_.pages());
    if (pooled && (uffd_.features() & UFFD_FEATURE_MOVE))
        pool_ = PagePool(uffd_, *c_, std::max(uint64_t{std::max(cfg_.poolBatches, 1u)} * geo_.batchPages, reserve),
                         geo_.pageShift, who);
    else if (anon && reserve && !pooled)
        reserve_ = PageReserve(*c_, reserve, who);
    else if (pooled)
        NPF_WARN("region %s: the kernel has no UFFDIO_MOVE (Linux 6.8): pages are allocated for every install "
                 "instead of recycled", who.c_str());
}

// A client's userfaultfd, and the installers that put pages into its
// mapping through it (4 KiB) or through its own thread (2 MiB).
void Region::adoptClient(ClientMemory& client)
{
    const std::string& who = cfg_.name;
    const bool huge = geo_.pageShift != NPF_PAGE_SHIFT;
    if (client.uffd)
        adoptClientUffd(std::move(client.uffd), client.base);
    if (clientUffd_ && !huge && cfg_.clientInstallWait.count() > 0) {
        clientInstaller_ = std::make_unique<ClientInstaller>(clientUffd_, bytes(geo_.batchPages),
                                                             cfg_.clientInstallWait, CoolDown(cfg_.clientCoolDown, cfg_.clientSlowForgiven),
                                                             "the client of region " + who);
        copy_.throughClient(clientInstaller_.get(), clientBase_);
    }
    // 2 MiB pages are charged to the hugetlb cgroup of the task that
    // allocates them, whichever mapping they go into: the client's own
    // thread must, through its install area.
    if (client.installArea && huge && cfg_.clientInstallWait.count() > 0) {
        remoteInstaller_ = std::make_unique<RemoteInstaller>(std::move(client.installArea), bytes(1), geo_.batchPages,
                                                             cfg_.clientInstallWait, CoolDown(cfg_.clientCoolDown, cfg_.clientSlowForgiven),
                                                             "the client of region " + who);
        copy_.throughRemote(remoteInstaller_.get());
    }
}

// The region's memfd (its own, or a client's) mapped.
void Region::mapMemfd(ClientMemory* client)
{
    const std::string& who = cfg_.name;
    const bool huge = geo_.pageShift != NPF_PAGE_SHIFT;
    if (client) {
        adoptMemfd(std::move(client->memfd));
    } else {
        memfd_.reset(::memfd_create(who.c_str(), MFD_CLOEXEC | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0)));
        if (!memfd_)
            throwErrno(huge ? "memfd_create(MFD_HUGETLB | MFD_HUGE_2MB) for region " + who +
                                  " (does the kernel have hugetlbfs?)"
                            : "memfd_create for region " + who);
        if (::ftruncate(memfd_.get(), static_cast<off_t>(geo_.size)) != 0)
            throwErrno("size region memfd " + who + " to " + sizeStr(geo_.size));
    }
    if (huge) // a client's hugetlbfs memfd takes its pages from the same pool
        checkHugePages(geo_.budgetPages ? geo_.budgetPages + geo_.batchPages : geo_.pages(), who);
    map_ = MmapArea::map(geo_.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd_.get(), 0,
                         "region " + who + " (" + sizeStr(geo_.size) + ")");
}

// The resident bits are cleared by state_'s destructor, first of the parts.
Region::~Region() = default;

const char* Region::route() const noexcept
{
    const bool huge = geo_.pageShift != NPF_PAGE_SHIFT;
    if (pool_)
        return huge ? routes::kPool2mThp : routes::kPool4k;
    if (!memfd_)
        return huge ? routes::kAnon2mThp : routes::kAnon4k;
    if (adopted_)
        return hugetlb_ ? routes::kClientHugetlbfs2m : routes::kClientMemfd4k;
    return hugetlb_ ? routes::kHugetlbfs2m : routes::kMemfd4k;
}

void Region::installPages(const InstallBatch& b, BatchTiming* t) noexcept
{
    // A client's thread installs (and allocates) the pages whenever it keeps
    // up; else they are copied in ours, counted as client_fallbacks.
    if (!hugetlb_ || remoteInstaller_) {
        copy_.install(b, t);
        return;
    }
    // 2 MiB pages, the faster primitive per case (npf-uffd-bench, one core):
    // a page with saved content is read into staging and copied (pread +
    // UFFDIO_COPY at 17 GB/s beats fallocate's zeroing at 13 GB/s plus the
    // same pread); one without is zeroed by fallocate and mapped with
    // CONTINUE (no image to clear and copy).
    for (size_t k = 0; k < b.size(); ++k) {
        if (state_.saved(b.pages[k]))
            copy_.install(b.sub(k, 1), t);
        else
            continue_.install(b.sub(k, 1), t);
    }
}

// The pieces [b, e) of the plan, all in `page`, which is present: written
// in place; true when they are settled (written, or failed in `results`),
// false when the page vanished (a client punched it) and must be installed.
bool Region::patchPresent(uint64_t page, size_t b, size_t e, std::span<int> results) noexcept
{
    auto pieces = plan_.pieces();
    const int rc = io_.patch(plan_, page, b, e);
    if (rc == -EFAULT) {
        // A client's page it punched behind our back: gone, with its
        // content. Installed again like any missing page (by the client's
        // thread, or by an ioctl of ours that fails cleanly when no page can
        // be had).
        vanished(page);
        return false;
    }
    if (rc) {
        c_->add<&RegionStats::errors>();
        NPF_WARN_RL("region %s: writing a payload into page %llu: %s", cfg_.name.c_str(),
                    static_cast<unsigned long long>(page), std::strerror(-rc));
        for (size_t k = b; k < e; ++k)
            results[pieces[k].patch] = rc;
        return true;
    }
    state_.setReferenced(page);
    // Present and written: a worker that faulted on it before it was
    // installed again may have cleared its bits late.
    if (adopted_ && !state_.isResident(bytes(page), bytes(1)))
        state_.setResident(page);
    c_->add<&RegionStats::patchesToResident>(e - b);
    return true;
}

// `page` and its pieces [b, e) go on the list of pages to install (or, when
// the list cannot grow, fail with -ENOMEM in `results`).
void Region::queueInstall(uint64_t page, size_t b, size_t e, std::span<int> results) noexcept
{
    bool ok = pushBack(scratchPages_, page);
    if (ok && !(ok = pushBack(scratchBegin_, b)))
        scratchPages_.pop_back();
    if (ok && !(ok = pushBack(scratchEnd_, e))) {
        scratchPages_.pop_back();
        scratchBegin_.pop_back();
    }
    if (!ok)
        for (size_t k = b; k < e; ++k)
            results[plan_.pieces()[k].patch] = -ENOMEM;
}

int Region::applyPatches(std::span<const Patch> patches, std::span<int> results, BatchTiming* t) noexcept
{
    if (results.size() < patches.size())
        return -EINVAL;
    std::lock_guard lk(mu_);
    if (t)
        *t = BatchTiming{monotonicNs()};
    int rc = plan_.build(patches, geo_.size, geo_.pageShift, results);
    if (rc < 0)
        return rc;
    auto pieces = plan_.pieces();
    scratchPages_.clear();
    scratchBegin_.clear();
    scratchEnd_.clear();
    for (size_t b = 0, e = 0; b < pieces.size(); b = e) {
        e = plan_.pageEnd(b);
        uint64_t page = pieces[b].page;
        state_.newContent(page);
        for (size_t k = b; k < e; ++k)
            state_.unrelease(bytes(page) + pieces[k].pageOff, pieces[k].len);
        if (!state_.present(page) || !patchPresent(page, b, e, results))
            queueInstall(page, b, e, results);
    }
    size_t n = scratchPages_.size();
    if (!ensureSize(scratchStatus_, n))
        return -ENOMEM;
    std::fill(scratchStatus_.begin(), scratchStatus_.end(), -EIO);
    if (n) {
        installPages({{scratchPages_.data(), n}, scratchBegin_.data(), scratchEnd_.data(), scratchStatus_.data()}, t);
        for (size_t k = 0; k < n; ++k) {
            if (scratchStatus_[k] == 0) {
                c_->add<&RegionStats::packetFaults>();
                continue;
            }
            for (size_t q = scratchBegin_[k]; q < scratchEnd_[k]; ++q)
                results[pieces[q].patch] = scratchStatus_[k];
        }
    }
    int done = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < patches.size(); ++i)
        if (results[i] == 0) {
            ++done;
            bytes += patches[i].len;
        }
    c_->add<&RegionStats::packetBatches>();
    c_->add<&RegionStats::patches>(static_cast<uint64_t>(done));
    c_->add<&RegionStats::patchBytes>(bytes);
    if (t)
        t->end = monotonicNs();
    autoEvictLocked();
    return done;
}

int Region::serviceFaults(BatchTiming* t) noexcept
{
    std::lock_guard lk(mu_);
    if (t)
        *t = BatchTiming{monotonicNs()};
    int rc = serviceFaultsLocked(t);
    if (t)
        t->end = monotonicNs();
    autoEvictLocked();
    return rc;
}

int Region::installFaulted(BatchTiming* t) noexcept
{
    std::sort(scratchPages_.begin(), scratchPages_.end());
    scratchPages_.erase(std::unique(scratchPages_.begin(), scratchPages_.end()), scratchPages_.end());
    if (scratchPages_.empty())
        return 0;
    if (!ensureSize(scratchStatus_, scratchPages_.size()))
        return -ENOMEM;
    std::fill(scratchStatus_.begin(), scratchStatus_.end(), -EIO);
    installPages({scratchPages_, nullptr, nullptr, scratchStatus_.data()}, t);
    return 0;
}

void Region::fastStoreFaulted(uintptr_t at) noexcept
{
    c_->add<&RegionStats::fastPathFaults>();
    if (cfg_.epochs && cfg_.epochs->waited())
        c_->add<&RegionStats::fastPathFaultsInGrace>();
    // Clearing a resident bit is always safe (XDP then steers to the backup
    // ring); the pager owns setting them.
    if (const std::optional<uint64_t> page = pageAt(at))
        state_.clearResident(*page);
}

std::optional<uint64_t> Region::pageAt(uintptr_t at) const noexcept
{
    const uintptr_t lo = reinterpret_cast<uintptr_t>(base());
    if (at < lo || at - lo >= geo_.size)
        return std::nullopt;
    return (at - lo) >> geo_.pageShift;
}

void Region::vanished(uint64_t page) noexcept
{
    state_.markVanished(page);
    c_->add<&RegionStats::vanished>();
    NPF_WARN_RL("region %s: page %llu was punched out of the client's memfd behind npfd: installed again, its "
                "content lost",
                cfg_.name.c_str(), static_cast<unsigned long long>(page));
}

bool Region::mapFaulted(uintptr_t at) noexcept
{
    const std::optional<uint64_t> page = hugetlb_ ? pageAt(at) : std::nullopt;
    // Not in the page cache (punched): nothing done, the pager places the
    // datagram. Any thread may: the page cannot be punched by us meanwhile
    // (the caller is in its epoch section and saw its bit). Already mapped
    // (another worker mapped it first) counts as mapped.
    return page && uffd_.mapCached(pageAddr(*page), bytes(1));
}

// A MISSING fault on a page we installed: the event raced with the install
// (the page is there: EEXIST), or another process punched the page (a client
// can punch its memfd): install it again, zeroed, as nothing was saved.
// Returns true if it was installed again.
bool Region::refill(uint64_t page) noexcept
{
    uint8_t* zero = staging_.as<uint8_t>();
    std::memset(zero, 0, bytes(1));
    long rc = uffd_.copy(pageAddr(page), zero, bytes(1), nullptr);
    c_->add<&RegionStats::copyCalls>();
    if (rc >= 0) {
        c_->add<&RegionStats::vanished>();
        c_->add<&RegionStats::pagesInstalled>();
        return true;
    }
    if (rc != -EEXIST) {
        c_->add<&RegionStats::errors>();
        NPF_WARN_RL("region %s: UFFDIO_COPY refilling page %llu: %s", cfg_.name.c_str(),
                    static_cast<unsigned long long>(page), std::strerror(static_cast<int>(-rc)));
    }
    return false;
}

int Region::serviceFaultsLocked(BatchTiming* t) noexcept
{
    int served = 0;
    uintptr_t lo = reinterpret_cast<uintptr_t>(base());
    for (int round = 0; round < 16; ++round) {
        int n = uffd_.readEvents(msgs_.data(), static_cast<int>(msgs_.size()));
        if (n < 0) {
            c_->add<&RegionStats::errors>();
            return served ? served : n;
        }
        if (n == 0)
            break;
        scratchPages_.clear();
        for (int m = 0; m < n; ++m) {
            const uffd_msg& msg = msgs_[m];
            if (msg.event != UFFD_EVENT_PAGEFAULT)
                continue;
            uintptr_t a = static_cast<uintptr_t>(msg.arg.pagefault.address);
            if (a < lo || a - lo >= geo_.size)
                continue;
            uint64_t page = (a - lo) >> geo_.pageShift;
            ++served;
            c_->add<&RegionStats::cpuFaults>();
            // WP: left over from an eviction whose fence is lifted; the
            // waiter only needs to retry. Present: see refill().
            bool wpFault = msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP;
            if ((msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_MINOR) && !wpFault) {
                // 2 MiB pages: in the page cache, not mapped here. Present:
                // map it. Not: left by an install that failed; start afresh.
                if (state_.present(page)) {
                    c_->add<&RegionStats::cpuFaultWakes>();
                    (void)uffd_.continueRange(pageAddr(page), bytes(1), nullptr);
                    uffd_.wake(pageAddr(page), bytes(1));
                    continue;
                }
                (void)io_.punch(page, 1);
            } else if (wpFault || state_.present(page)) {
                if (!wpFault && refill(page))
                    continue; // UFFDIO_COPY woke the waiter
                c_->add<&RegionStats::cpuFaultWakes>();
                uffd_.wake(pageAddr(page), bytes(1));
                continue;
            }
            if (!pushBack(scratchPages_, page)) {
                c_->add<&RegionStats::errors>();
                uffd_.wake(pageAddr(page), bytes(1)); // faults again later
            }
        }
        int rc = installFaulted(t);
        for (size_t k = 0; k < scratchPages_.size(); ++k)
            if (rc || scratchStatus_[k] != 0) // never leave a faulting thread hanging
                uffd_.wake(pageAddr(scratchPages_[k]), bytes(1));
        if (n < static_cast<int>(msgs_.size()))
            break;
    }
    return served;
}

// 2 MiB pages: allocating one (the kernel zeroes it, ~160 us here) is most
// of an install, so prefetch does it before taking the lock for the pages
// with nothing saved: another pager placing payloads into this region is
// not held up behind it, and the install finds them in the page cache (its
// fallocate is then a no-op). The pages are held meanwhile, so no eviction
// saves and punches one between the check and the fallocate (which would
// put a zeroed page over saved content); the check is under the lock, after
// any eviction that took victims before the hold. Returns the pages held.
size_t Region::preallocate(uint64_t first, uint64_t last, std::span<uint64_t> held) noexcept
{
    size_t n = 0;
    for (uint64_t p = first; p <= last && n < held.size(); ++p)
        if (!state_.present(p)) { // a hint here; decided under the lock
            state_.hold(p);
            held[n++] = p;
        }
    std::array<uint64_t, kPreallocMax> fresh;
    size_t nFresh = 0;
    {
        std::lock_guard lk(mu_);
        for (size_t i = 0; i < n; ++i)
            if (!state_.present(held[i]) && !state_.saved(held[i]))
                fresh[nFresh++] = held[i];
    }
    // A failure shows again (and is reported) in the install.
    for (size_t i = 0; i < nFresh; ++i)
        (void)!::fallocate(memfd_.get(), 0, static_cast<off_t>(bytes(fresh[i])), static_cast<off_t>(bytes(1)));
    return n;
}

int Region::prefetch(uint64_t offset, uint64_t len) noexcept
{
    if (offset > geo_.size || len > geo_.size - offset)
        return -EINVAL;
    if (!len)
        return 0;
    const uint64_t first = offset >> geo_.pageShift, last = (offset + len - 1) >> geo_.pageShift;
    std::array<uint64_t, kPreallocMax> held;
    // hugetlbfs, unless the client's thread allocates the pages (its pod pays)
    const size_t nHeld = hugetlb_ && !remoteInstaller_ ? preallocate(first, last, held) : 0;
    const int rc = prefetchLocked(first, last);
    for (size_t i = 0; i < nHeld; ++i)
        state_.unhold(held[i]);
    return rc;
}

int Region::prefetchLocked(uint64_t first, uint64_t last) noexcept
{
    std::lock_guard lk(mu_);
    int installed = 0;
    for (uint64_t p = first; p <= last;) {
        scratchPages_.clear();
        // One batch at a time, evicting after each: residency stays within
        // the budget plus one batch however long the range is.
        for (; p <= last && scratchPages_.size() < geo_.batchPages; ++p)
            if (!state_.present(p) && !pushBack(scratchPages_, p))
                return installed ? installed : -ENOMEM;
        if (scratchPages_.empty())
            continue;
        if (!ensureSize(scratchStatus_, scratchPages_.size()))
            return installed ? installed : -ENOMEM;
        std::fill(scratchStatus_.begin(), scratchStatus_.end(), -EIO);
        installPages({scratchPages_, nullptr, nullptr, scratchStatus_.data()}, nullptr);
        for (int s : scratchStatus_)
            installed += s == 0;
        autoEvictLocked();
    }
    c_->add<&RegionStats::prefetched>(static_cast<uint64_t>(installed));
    return installed;
}

int Region::release(uint64_t offset, uint64_t len) noexcept
{
    if (offset > geo_.size || len > geo_.size - offset)
        return -EINVAL;
    c_->add<&RegionStats::releases>();
    std::lock_guard lk(mu_);
    return state_.release(offset, len, [&](uint64_t page) { spill_.drop(bytes(page), bytes(1)); });
}

RegionStats Region::stats() const noexcept
{
    RegionStats s;
    c_->addTo(s);
    s.residentPages = residentPages();
    return s;
}

} // namespace npf
