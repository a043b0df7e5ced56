// The kernel's limit for npf's fault path: what each primitive that puts a page
// into a userfaultfd-registered region costs on this machine, 4 KiB and 2 MiB
// pages. Every fault-path number is quoted against these (ratio of the limit).
//
// Each case runs on a fresh region per trial (memfd + MAP_SHARED + UFFDIO_REGISTER,
// as npf's Region does), so every install really fills a missing page; trials
// alternate between cases (drift on a shared machine hits all alike) and the table
// shows medians with the range over trials. Cases made of phases (fallocate, alias
// write, CONTINUE) run them group by group (64 pages, or one 2 MiB page), one clock
// read per phase and group, and report each phase and the sum. The on-cpu column
// (thread CPU time / wall time of the case's worst trial) shows whether another task
// took the CPU during a trial.
//
// The 2 MiB cases need free hugetlb pages: when too few are free, the benchmark
// raises vm.nr_hugepages by what it needs and puts the old value back at exit
// (also on SIGINT/SIGTERM).
//
// The routes of a recycled page pool on private anonymous memory (UFFDIO_MOVE,
// Linux >= 6.8) are measured as whole steady cycles against the COPY routes, as a
// pager under a budget runs them (3/4 of the region resident): per group, evict
// the oldest resident group (punch-hole on memfd, MADV_DONTNEED on anonymous
// memory, UFFDIO_MOVE region -> pool: no free), write the page images where the
// route takes them from (the COPY routes' staging buffer, the pool's own pages),
// install them (UFFDIO_COPY, or UFFDIO_MOVE pool -> region), check them (untimed).
// 4 KiB pages, and 2 MiB: a THP pool (MADV_HUGEPAGE) against hugetlbfs. The pool
// is populated before it is registered, outside the timed window.
//
// Usage: npf-uffd-bench [--trials N] [--mib N] [--cpu N] [--json FILE]
// Prints a table, then one JSON line. Root (or access to /dev/userfaultfd).
#include <fcntl.h>
#include <linux/falloc.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <asm-generic/hugetlb_encode.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/version.h"
#include "region/uffd.h"
#include "huge_pages.h"
#include "report.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"

namespace {

using npf::Fd;
using npf::MmapArea;
using npf::monotonicNs;
using npf::throwErrno;
using npf::Userfaultfd;
using Json = nlohmann::ordered_json;

constexpr size_t k4K = 4096, k2M = 2u << 20;
constexpr size_t kGroup = 64;        // pages per group in phased 4 KiB cases
constexpr size_t kStagePages = 256;  // the largest UFFDIO_COPY run
constexpr unsigned kMfdHuge2M = MFD_HUGETLB | HUGETLB_FLAG_ENCODE_2MB;
#define NPF_HUGE_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB/"
const char* const kHugeDir = NPF_HUGE_DIR;
const char* const kNoMove = "UFFDIO_MOVE needs Linux 6.8"; // the MOVE cases' line without UFFD_FEATURE_MOVE

// ---- hugetlb pool ----------------------------------------------------------

// What the signal handler writes back to nr_hugepages ("" when nothing to restore).
char g_restoreText[32];
volatile sig_atomic_t g_restoreArmed = 0;

void restoreOnSignal(int sig)
{
    if (g_restoreArmed) {
        int fd = ::open(NPF_HUGE_DIR "nr_hugepages", O_WRONLY);
        if (fd >= 0) {
            ssize_t n = ::write(fd, g_restoreText, ::strlen(g_restoreText));
            (void)n;
            ::close(fd);
        }
    }
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

long readLong(const std::string& file)
{
    std::ifstream f(file);
    long v = -1;
    f >> v;
    return f ? v : -1;
}

bool writeLong(const std::string& file, long v)
{
    std::ofstream f(file);
    f << v << '\n';
    f.flush();
    return bool(f);
}

// Makes `need` 2 MiB hugetlb pages free for this process; gives back what it
// added at destruction (and, through restoreOnSignal, on SIGINT/SIGTERM).
class HugePool {
public:
    HugePool(const HugePool&) = delete;
    HugePool& operator=(const HugePool&) = delete;
    ~HugePool()
    {
        if (added_ == 0)
            return;
        g_restoreArmed = 0;
        const long now = readLong(file("nr_hugepages"));
        // Someone else raised the pool meanwhile: give back only what we added;
        // never raise it (the kernel may have granted less than we asked).
        const long back = now > set_ ? now - added_ : std::min(now, old_);
        if (!writeLong(file("nr_hugepages"), back))
            std::fprintf(stderr, "npf-uffd-bench: could not restore nr_hugepages to %ld: %s\n", back,
                         std::strerror(errno));
    }

    // nullptr with *why set when the pages cannot be had.
    static std::unique_ptr<HugePool> reserve(long need, std::string* why)
    {
        std::unique_ptr<HugePool> p(new HugePool);
        p->old_ = readLong(file("nr_hugepages"));
        if (p->old_ < 0) {
            *why = "no 2 MiB huge page size here (" + std::string(kHugeDir) + " missing)";
            return nullptr;
        }
        const long avail = readLong(file("free_hugepages")) - readLong(file("resv_hugepages"));
        if (avail < need) {
            p->set_ = p->old_ + (need - avail);
            std::snprintf(g_restoreText, sizeof g_restoreText, "%ld\n", p->old_);
            g_restoreArmed = 1;
            p->added_ = p->set_ - p->old_;
            if (!writeLong(file("nr_hugepages"), p->set_) ||
                readLong(file("free_hugepages")) - readLong(file("resv_hugepages")) < need) {
                *why = "could not reserve " + std::to_string(need) + " free 2 MiB pages (nr_hugepages " +
                       std::to_string(p->old_) + " -> " + std::to_string(readLong(file("nr_hugepages"))) +
                       "); as root: echo " + std::to_string(p->set_) +
                       " > /proc/sys/vm/nr_hugepages (2 MiB default huge page size), then run again";
                return nullptr; // the destructor puts the old value back
            }
        }
        return p;
    }

    long before() const noexcept { return old_; }
    long added() const noexcept { return added_; }
    // True when this run added pages to the pool (their first use may cost more).
    bool freshPages() const noexcept { return added_ > 0; }

private:
    HugePool() = default;
    static std::string file(const char* name) { return std::string(kHugeDir) + name; }

    long old_ = -1, set_ = -1, added_ = 0;
};

// ---- regions ---------------------------------------------------------------

// A memfd of `pages` pages of `page` bytes (hugetlb for 2 MiB) and its shared mapping.
struct Memfd {
    Fd fd;
    MmapArea map;
    size_t page = 0, pages = 0;

    static Memfd create(size_t page, size_t pages, const char* who)
    {
        Memfd m;
        m.page = page;
        m.pages = pages;
        m.fd.reset(::memfd_create(who, MFD_CLOEXEC | (page == k2M ? kMfdHuge2M : 0)));
        if (!m.fd)
            throwErrno(std::string("memfd_create ") + who);
        if (::ftruncate(m.fd.get(), off_t(m.bytes())) != 0)
            throwErrno(std::string("size memfd ") + who);
        m.map = m.mapAgain(who);
        return m;
    }
    // A second mapping of the same pages (the pager's unregistered alias).
    MmapArea mapAgain(const char* who) const
    {
        return MmapArea::map(bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | (page == k2M ? 0 : MAP_NORESERVE),
                             fd.get(), 0, who);
    }
    size_t bytes() const noexcept { return page * pages; }
    uint8_t* at(size_t i) const noexcept { return map.as<uint8_t>() + i * page; }
    off_t off(size_t i) const noexcept { return off_t(i * page); }
};

int zeropage(const Userfaultfd& u, void* dst, size_t len) noexcept
{
    uffdio_zeropage z{};
    z.range.start = reinterpret_cast<uint64_t>(dst);
    z.range.len = len;
    return ::ioctl(u.fd(), UFFDIO_ZEROPAGE, &z) == 0 ? 0 : -errno;
}

int continueRange(const Userfaultfd& u, void* dst, size_t len) noexcept
{
    uffdio_continue c{};
    c.range.start = reinterpret_cast<uint64_t>(dst);
    c.range.len = len;
    return ::ioctl(u.fd(), UFFDIO_CONTINUE, &c) == 0 ? 0 : -errno;
}

void check(int rc, const char* what, size_t page)
{
    if (rc < 0)
        throwErrno(-rc, std::string(what) + " at page " + std::to_string(page));
}

// The installed bytes must equal `want` (a page that was never filled would
// raise SIGBUS: the uffd is opened with UFFD_FEATURE_SIGBUS).
void verify(const uint8_t* got, const uint8_t* want, size_t len, const char* what)
{
    if (std::memcmp(got, want, len) != 0)
        throwErrno(EIO, std::string(what) + ": page content differs from what was installed");
}

size_t roundUp2M(size_t n) { return (n + k2M - 1) / k2M * k2M; }

// Private anonymous memory: a pool (or a staging buffer) and a region, each 2 MiB
// aligned, in one PROT_NONE reservation that keeps them apart (two mappings never
// merged into one: smaps reports each alone). 2 MiB pages: MADV_HUGEPAGE (THP);
// 4 KiB: MADV_NOHUGEPAGE. A size of 0 leaves that part out.
struct AnonPair {
    MmapArea whole;
    uint8_t* pool = nullptr;
    uint8_t* region = nullptr;

    static AnonPair create(size_t poolBytes, size_t regionBytes, size_t page, const char* who)
    {
        AnonPair a;
        const size_t poolSpan = roundUp2M(poolBytes) + k2M; // and a PROT_NONE gap
        a.whole = MmapArea::map(k2M + poolSpan + roundUp2M(regionBytes), PROT_NONE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, who);
        const uintptr_t base = (reinterpret_cast<uintptr_t>(a.whole.get()) + k2M - 1) & ~uintptr_t(k2M - 1);
        a.pool = reinterpret_cast<uint8_t*>(base);
        a.region = a.pool + poolSpan;
        open(a.pool, poolBytes, page, who);
        open(a.region, regionBytes, page, who);
        return a;
    }

private:
    static void open(uint8_t* p, size_t len, size_t page, const char* who)
    {
        if (len == 0)
            return;
        if (::mprotect(p, len, PROT_READ | PROT_WRITE) != 0)
            throwErrno(std::string("mprotect ") + who);
        if (::madvise(p, len, page == k2M ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
            throwErrno(std::string("madvise (THP) ") + who);
    }
};

// UFFDIO_MOVE of len bytes from src to dst: the pages themselves change place (no
// copy, no allocation); dst must be a hole registered with this uffd, src mapped.
void moveRange(const Userfaultfd& u, void* dst, void* src, size_t len, const char* what, size_t page)
{
    int64_t moved = 0;
    if (long rc = u.move(dst, src, len, &moved); rc < 0)
        throwErrno(static_cast<int>(-rc), std::string(what) + " at page " + std::to_string(page) + " (" +
                                              std::to_string(moved) + " of " + std::to_string(len) + " bytes moved)");
}

// What the kernel gave the THP pool (move-thp), over its trials: PMD-mapped kB of
// the pool once populated, and of the region after the first UFFDIO_MOVE in (the
// huge page moved whole; split into 4 KiB pages otherwise), against their sizes.
struct ThpSeen {
    int trials = 0;
    long poolWantKb = 0, poolKbMin = -1, regionWantKb = 0, regionKbMin = -1;

    void add(long poolWant, long pool, long regionWant, long region)
    {
        poolWantKb = poolWant;
        regionWantKb = regionWant;
        poolKbMin = trials == 0 ? pool : std::min(poolKbMin, pool);
        regionKbMin = trials == 0 ? region : std::min(regionKbMin, region);
        trials++;
    }
    bool pmdMapped() const noexcept
    {
        return trials > 0 && poolKbMin >= poolWantKb && regionKbMin >= regionWantKb;
    }
};

// How a route installs and evicts a page.
enum class Route {
    MemfdPunch,   // UFFDIO_COPY into memfd (shmem or hugetlbfs), fallocate(PUNCH_HOLE)
    AnonDontneed, // UFFDIO_COPY into private anonymous memory, MADV_DONTNEED
    PoolMove,     // UFFDIO_MOVE from a pool of anonymous pages, and back
};

const char* routeName(Route r)
{
    return r == Route::PoolMove       ? "pool MOVE in + MOVE out"
           : r == Route::AnonDontneed ? "anonymous COPY + MADV_DONTNEED"
                                      : "memfd COPY + punch";
}

const char* pageName(size_t page) { return page == k2M ? "2 MiB" : "4 KiB"; }

// One trial's memory for a route: the registered region, and where page images are
// written: the COPY routes' staging buffer, or the pool (registered with the same
// uffd, since UFFDIO_MOVE's destination must be, to take pages back). The pool is
// populated before registration: touching a hole of it afterwards raises SIGBUS.
struct RouteArea {
    Route route = Route::MemfdPunch;
    size_t page = k4K;
    Memfd memfd; // the region of Route::MemfdPunch
    AnonPair anon;
    uint8_t* region = nullptr;
    uint8_t* pool = nullptr;

    static RouteArea create(const Userfaultfd& u, Route route, size_t page, size_t pages, size_t slots)
    {
        RouteArea a;
        a.route = route;
        a.page = page;
        const bool memfd = route == Route::MemfdPunch;
        a.anon = AnonPair::create(slots * page, memfd ? 0 : pages * page, page, "uffd-bench route");
        a.pool = a.anon.pool;
        if (memfd)
            a.memfd = Memfd::create(page, pages, "uffd-bench cycle");
        a.region = memfd ? a.memfd.at(0) : a.anon.region;
        if (::madvise(a.pool, slots * page, MADV_POPULATE_WRITE) != 0)
            throwErrno("MADV_POPULATE_WRITE of the pool");
        u.registerRange(a.region, pages * page, UFFDIO_REGISTER_MODE_MISSING, "route region");
        if (route == Route::PoolMove)
            u.registerRange(a.pool, slots * page, UFFDIO_REGISTER_MODE_MISSING, "pool");
        return a;
    }

    // Region pages [i, end) from the slots from `slot` on, in runs of n; and back.
    void installRuns(const Userfaultfd& u, size_t i, size_t end, size_t slot, size_t n) const
    {
        for (size_t k = i; k < end; k += n)
            install(u, k, slot + k - i, std::min(n, end - k) * page);
    }
    void evictRuns(const Userfaultfd& u, size_t i, size_t end, size_t slot, size_t n) const
    {
        for (size_t k = i; k < end; k += n)
            evict(u, k, slot + k - i, std::min(n, end - k) * page);
    }

    // Region page k (len bytes from there) from pool slot `slot`.
    void install(const Userfaultfd& u, size_t k, size_t slot, size_t len) const
    {
        if (route == Route::PoolMove)
            return moveRange(u, region + k * page, pool + slot * page, len, "UFFDIO_MOVE pool -> region", k);
        int64_t copied = 0;
        const long rc = u.copy(region + k * page, pool + slot * page, len, &copied);
        check(int(rc < 0 ? rc : 0), "UFFDIO_COPY", k);
    }

    void evict(const Userfaultfd& u, size_t k, size_t slot, size_t len) const
    {
        if (route == Route::PoolMove)
            return moveRange(u, pool + slot * page, region + k * page, len, "UFFDIO_MOVE region -> pool", k);
        if (route == Route::AnonDontneed && ::madvise(region + k * page, len, MADV_DONTNEED) != 0)
            throwErrno("MADV_DONTNEED page " + std::to_string(k));
        if (route == Route::MemfdPunch &&
            ::fallocate(memfd.fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, memfd.off(k), off_t(len)) != 0)
            throwErrno("punch page " + std::to_string(k));
    }
};

// ---- cases -----------------------------------------------------------------

// One timed line of the table.
struct Row {
    std::string name;
    std::vector<double> ns; // ns per page, one per trial
};

// A case: one trial fills `rows` (ns per page each) on a fresh region.
struct Case {
    std::string name;
    size_t page;
    size_t perCall;
    std::vector<Row> rows;
    std::function<std::vector<double>()> trial;
    std::string skip;  // why not run
    int installRow;    // the row of a whole install (a filled page mapped), -1 if none
    int cycleRow;      // the row of a whole install + evict cycle, -1 if none
    std::vector<double> onCpu; // per trial: thread CPU time / wall time (< 1: preempted)
};

struct Bench {
    const Userfaultfd& uffd;
    size_t pages4k, pages2m;
    MmapArea stage;   // kStagePages 4 KiB page images (the pager's staging)
    MmapArea src2m;   // one 2 MiB page image
    MmapArea resident; // pages4k resident pages, for memcpy
    mutable ThpSeen thp; // what the THP pool got (filled by cycle(k2M, ..., PoolMove))

    static MmapArea pattern(size_t len, unsigned seed, const char* who)
    {
        auto m = MmapArea::map(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0, who);
        auto* p = m.as<uint8_t>();
        for (size_t i = 0; i < len; i++)
            p[i] = uint8_t(i * 31 + seed + i / k4K);
        return m;
    }

    const uint8_t* img(size_t k) const noexcept { return stage.as<uint8_t>() + (k % kStagePages) * k4K; }

    // UFFDIO_COPY of runs of n 4 KiB pages from the staging buffer, into memfd
    // (shmem) or, anon, into private anonymous memory (MADV_NOHUGEPAGE).
    std::vector<double> copy4k(size_t n, bool anon) const
    {
        Memfd mfd;
        AnonPair ap;
        if (anon)
            ap = AnonPair::create(0, pages4k * k4K, k4K, "uffd-bench copy anon");
        else
            mfd = Memfd::create(k4K, pages4k, "uffd-bench copy");
        uint8_t* const r = anon ? ap.region : mfd.at(0);
        uffd.registerRange(r, pages4k * k4K, UFFDIO_REGISTER_MODE_MISSING, "copy region");
        const uint64_t t0 = monotonicNs();
        for (size_t i = 0; i < pages4k; i += n) {
            int64_t copied = 0;
            long rc = uffd.copy(r + i * k4K, img(0), std::min(n, pages4k - i) * k4K, &copied);
            check(int(rc < 0 ? rc : 0), "UFFDIO_COPY", i);
        }
        const double ns = double(monotonicNs() - t0);
        verify(r + (pages4k - 1) * k4K, img((pages4k - 1) % n), k4K, "UFFDIO_COPY");
        return {ns / double(pages4k)};
    }

    const uint8_t* image(size_t page, size_t k) const noexcept
    {
        return page == k2M ? src2m.as<uint8_t>() : img(k);
    }

    // The steady cycle of a route as a pager under a budget runs it: `lag` pages (3/4
    // of the region: more than the LLC at the default size) stay resident; each next
    // group (64 pages, or one 2 MiB page) evicts the oldest resident group, writes its
    // page images where the route takes them from, and installs them; runs of n. The
    // evicted pages are cold, as a pager's are. Filling the first `lag` pages is not
    // timed; each phase of the later groups is. Untimed checks: the region holds the
    // images after each install, and at the end, the last pages evicted, the pool does.
    std::vector<double> cycle(size_t page, size_t n, Route route) const
    {
        const size_t pages = page == k2M ? pages2m : pages4k, g = page == k2M ? n : std::max(n, kGroup);
        const size_t lag = std::max<size_t>(1, pages / g * 3 / 4) * g;
        const bool move = route == Route::PoolMove, thpPool = move && page == k2M;
        const RouteArea a = RouteArea::create(uffd, route, page, pages, move ? lag : g);
        const long poolKb = thpPool ? npf::topology::anonHugeKiB(a.pool) : -1;
        uint64_t evict = 0, write = 0, install = 0;
        for (size_t i = 0; i < pages; i += g) {
            const size_t end = std::min(i + g, pages), slot = move ? i % lag : 0;
            const uint64_t t0 = monotonicNs();
            if (i >= lag)
                a.evictRuns(uffd, i - lag, end - lag, slot, n);
            const uint64_t t1 = monotonicNs();
            for (size_t k = i; k < end; k++)
                std::memcpy(a.pool + (slot + k - i) * page, image(page, k), page);
            asm volatile("" ::: "memory");
            const uint64_t t2 = monotonicNs();
            a.installRuns(uffd, i, end, slot, n);
            const uint64_t t3 = monotonicNs();
            verifyGroup(a.region + i * page, page, i, end, route, "installed page");
            if (i == 0 && thpPool)
                thp.add(long(lag * page / 1024), poolKb, long(g * page / 1024), npf::topology::anonHugeKiB(a.region));
            if (i >= lag) {
                evict += t1 - t0;
                write += t2 - t1;
                install += t3 - t2;
            }
        }
        for (size_t i = pages - lag; i < pages; i += g) { // the last pages out, untimed
            const size_t end = std::min(i + g, pages), slot = move ? i % lag : 0;
            a.evictRuns(uffd, i, end, slot, n);
            if (move)
                verifyGroup(a.pool + slot * page, page, i, end, route, "pool slot of page");
        }
        const double p = double(pages - lag);
        return {double(write) / p, double(install) / p, double(write + install) / p, double(evict) / p,
                double(write + install + evict) / p};
    }

    // Pages [i, end) of page size `page` from `at` on hold their images.
    void verifyGroup(const uint8_t* at, size_t page, size_t i, size_t end, Route route, const char* what) const
    {
        for (size_t k = i; k < end; k++)
            if (std::memcmp(at + (k - i) * page, image(page, k), page) != 0)
                throwErrno(EIO, std::string(routeName(route)) + ", " + pageName(page) + ": " + what + " " +
                                    std::to_string(k) + " does not hold its image");
    }

    // UFFDIO_ZEROPAGE in runs of n, then a 4 KiB write into each page; by groups.
    std::vector<double> zero4k(size_t n) const
    {
        auto r = Memfd::create(k4K, pages4k, "uffd-bench zeropage");
        uffd.registerRange(r.map.get(), r.bytes(), UFFDIO_REGISTER_MODE_MISSING, "zeropage region");
        const size_t g = std::max(n, kGroup);
        uint64_t zero = 0, write = 0;
        for (size_t i = 0; i < pages4k; i += g) {
            const size_t end = std::min(i + g, pages4k);
            const uint64_t t0 = monotonicNs();
            for (size_t k = i; k < end; k += n)
                check(zeropage(uffd, r.at(k), std::min(n, end - k) * k4K), "UFFDIO_ZEROPAGE", k);
            const uint64_t t1 = monotonicNs();
            for (size_t k = i; k < end; k++)
                std::memcpy(r.at(k), img(k), k4K);
            asm volatile("" ::: "memory");
            zero += t1 - t0;
            write += monotonicNs() - t1;
        }
        verify(r.at(pages4k - 1), img(pages4k - 1), k4K, "ZEROPAGE + write");
        const double p = double(pages4k);
        return {double(zero) / p, double(write) / p, double(zero + write) / p};
    }

    // Page-cache pages filled outside the registered mapping, then UFFDIO_CONTINUE
    // in runs of n. Fill::Fallocate: fallocate, then a write through an unregistered
    // alias mapping (which takes its own page-table fault per page); Fill::Populate:
    // MADV_POPULATE_WRITE of the run on the alias (allocates and maps in one call),
    // then the write; Fill::Pwrite: pwrite() to the memfd (allocates and copies in one
    // call, no alias; 4 KiB only: hugetlbfs has no write()).
    enum class Fill { Fallocate, Populate, Pwrite };
    std::vector<double> minor(size_t page, size_t n, Fill how) const
    {
        const size_t pages = page == k2M ? pages2m : pages4k;
        auto r = Memfd::create(page, pages, "uffd-bench minor");
        auto alias = r.mapAgain("uffd-bench minor alias");
        uffd.registerRange(r.map.get(), r.bytes(), UFFDIO_REGISTER_MODE_MINOR, "minor region");
        auto image = [&](size_t k) { return page == k2M ? src2m.as<uint8_t>() : img(k); };
        const size_t g = page == k2M ? n : std::max(n, kGroup);
        uint64_t fill = 0, write = 0, cont = 0;
        for (size_t i = 0; i < pages; i += g) {
            const size_t end = std::min(i + g, pages);
            const uint64_t t0 = monotonicNs();
            for (size_t k = i; k < end; k += n) {
                const size_t len = std::min(n, end - k) * page;
                if (how == Fill::Pwrite) {
                    if (::pwrite(r.fd.get(), img(k), len, r.off(k)) != ssize_t(len))
                        throwErrno("pwrite page " + std::to_string(k));
                } else if (how == Fill::Populate) {
                    if (::madvise(alias.as<uint8_t>() + k * page, len, MADV_POPULATE_WRITE) != 0)
                        throwErrno("MADV_POPULATE_WRITE page " + std::to_string(k));
                } else if (::fallocate(r.fd.get(), 0, r.off(k), off_t(len)) != 0) {
                    throwErrno("fallocate page " + std::to_string(k));
                }
            }
            const uint64_t t1 = monotonicNs();
            if (how != Fill::Pwrite) {
                for (size_t k = i; k < end; k++)
                    std::memcpy(alias.as<uint8_t>() + k * page, image(k), page);
                asm volatile("" ::: "memory");
            }
            const uint64_t t2 = monotonicNs();
            for (size_t k = i; k < end; k += n)
                check(continueRange(uffd, r.at(k), std::min(n, end - k) * page), "UFFDIO_CONTINUE", k);
            const uint64_t t3 = monotonicNs();
            fill += t1 - t0;
            write += t2 - t1;
            cont += t3 - t2;
        }
        verify(r.at(pages - 1), image(pages - 1), page, "UFFDIO_CONTINUE");
        const double p = double(pages);
        if (how == Fill::Pwrite)
            return {double(fill) / p, double(cont) / p, double(fill + cont) / p};
        return {double(fill) / p, double(write) / p, double(cont) / p, double(fill + write + cont) / p};
    }

    // UFFDIO_WAKE of a page nobody waits on: what any uffd ioctl costs per call.
    std::vector<double> wakeFloor() const
    {
        auto r = Memfd::create(k4K, kGroup, "uffd-bench wake");
        uffd.registerRange(r.map.get(), r.bytes(), UFFDIO_REGISTER_MODE_MISSING, "wake region");
        const uint64_t t0 = monotonicNs();
        for (size_t i = 0; i < pages4k; i++)
            check(uffd.wake(r.at(i % kGroup), k4K), "UFFDIO_WAKE", i);
        return {double(monotonicNs() - t0) / double(pages4k)};
    }

    // UFFDIO_COPY of one 2 MiB page per call into a hugetlbfs region.
    std::vector<double> copy2m() const
    {
        auto r = Memfd::create(k2M, pages2m, "uffd-bench copy 2M");
        uffd.registerRange(r.map.get(), r.bytes(), UFFDIO_REGISTER_MODE_MISSING, "2 MiB copy region");
        const uint64_t t0 = monotonicNs();
        for (size_t i = 0; i < pages2m; i++) {
            int64_t copied = 0;
            long rc = uffd.copy(r.at(i), src2m.get(), k2M, &copied);
            check(int(rc < 0 ? rc : 0), "UFFDIO_COPY 2 MiB", i);
        }
        const double ns = double(monotonicNs() - t0);
        verify(r.at(pages2m - 1), src2m.as<uint8_t>(), k2M, "UFFDIO_COPY 2 MiB");
        return {ns / double(pages2m)};
    }

    // fallocate(PUNCH_HOLE) of mapped, written pages in runs of n (eviction).
    std::vector<double> punch(size_t page, size_t n) const
    {
        const size_t pages = page == k2M ? pages2m : pages4k;
        auto r = Memfd::create(page, pages, "uffd-bench punch");
        for (size_t k = 0; k < pages; k++)
            std::memset(r.at(k), int(k), page);
        const uint64_t t0 = monotonicNs();
        for (size_t k = 0; k < pages; k += n)
            if (::fallocate(r.fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, r.off(k),
                            off_t(std::min(n, pages - k) * page)) != 0)
                throwErrno("punch page " + std::to_string(k));
        const double ns = double(monotonicNs() - t0);
        if (r.at(pages - 1)[page - 1] != 0)
            throwErrno(EIO, "punched page still holds data");
        return {ns / double(pages)};
    }

    // memcpy of `len`-byte blocks over the resident buffer (memory speed).
    std::vector<double> copyResident(size_t len) const
    {
        const size_t blocks = resident.size() / len;
        const uint8_t* src = len == k2M ? src2m.as<uint8_t>() : img(0);
        const uint64_t t0 = monotonicNs();
        for (size_t k = 0; k < blocks; k++)
            std::memcpy(resident.as<uint8_t>() + k * len, src, len);
        asm volatile("" ::: "memory");
        return {double(monotonicNs() - t0) / double(blocks)};
    }
};

// The rows of a cycle case (Bench::cycle).
std::vector<std::string> cycleRows(size_t page, Route route)
{
    const std::string p = pageName(page);
    if (route == Route::PoolMove)
        return {"write " + p + " image in pool page", "UFFDIO_MOVE pool -> region", "  install: write + MOVE",
                "UFFDIO_MOVE region -> pool", "  cycle: install + evict"};
    return {"write " + p + " image in staging", "UFFDIO_COPY", "  install: write + COPY",
            route == Route::MemfdPunch ? "fallocate(PUNCH_HOLE)" : "MADV_DONTNEED", "  cycle: install + evict"};
}

// The 4 KiB install + evict cycles: memfd COPY + punch, anonymous COPY +
// MADV_DONTNEED, anonymous pool MOVE in + MOVE out.
template <typename Add>
void addCycles(Add& add, const Bench& b, const std::string& noMove)
{
    for (size_t n : {1, 16, 64})
        add("cycle-memfd", k4K, n, cycleRows(k4K, Route::MemfdPunch),
            [&b, n] { return b.cycle(k4K, n, Route::MemfdPunch); }, "");
    for (size_t n : {1, 16, 64})
        add("cycle-anon", k4K, n, cycleRows(k4K, Route::AnonDontneed),
            [&b, n] { return b.cycle(k4K, n, Route::AnonDontneed); }, "");
    for (size_t n : {1, 16, 64})
        add("move-pool", k4K, n, cycleRows(k4K, Route::PoolMove), [&b, n] { return b.cycle(k4K, n, Route::PoolMove); },
            noMove);
}

// The cases in table order. A case whose `skip` is set is listed, not run.
std::vector<Case> makeCases(const Bench& b, uint64_t feat, const std::string& hugeWhy)
{
    std::vector<Case> cases;
    auto add = [&](std::string name, size_t page, size_t perCall, std::vector<std::string> rows,
                   std::function<std::vector<double>()> f, std::string skip = {}) {
        const bool cycle = name.starts_with("cycle-") || name.starts_with("move-");
        const bool install = name.starts_with("copy") || name.find("continue") != std::string::npos ||
                             name == "zeropage";
        // A cycle's rows: write images, install, write + install, evict, the whole cycle.
        const int installRow = name.starts_with("move-") ? 2 : install ? int(rows.size()) - 1 : -1;
        Case c{std::move(name), page, perCall, {}, std::move(f), std::move(skip), installRow, cycle ? 4 : -1, {}};
        for (auto& r : rows)
            c.rows.push_back({std::move(r), {}});
        cases.push_back(std::move(c));
    };
    const std::string noMinor = (feat & UFFD_FEATURE_MINOR_SHMEM) ? "" : "kernel lacks UFFD_FEATURE_MINOR_SHMEM";
    const std::string noMove = (feat & UFFD_FEATURE_MOVE) ? "" : kNoMove;
    for (size_t n : {1, 16, 64, 256})
        add("copy", k4K, n, {"UFFDIO_COPY"}, [&b, n] { return b.copy4k(n, false); });
    for (size_t n : {1, 16, 64})
        add("copy-anon", k4K, n, {"UFFDIO_COPY, anonymous"}, [&b, n] { return b.copy4k(n, true); });
    for (size_t n : {1, 64})
        add("zeropage", k4K, n, {"UFFDIO_ZEROPAGE", "  write 4 KiB into it", "  ZEROPAGE + write"},
            [&b, n] { return b.zero4k(n); });
    for (size_t n : {1, 64})
        add("continue", k4K, n,
            {"fallocate", "  alias write 4 KiB", "  UFFDIO_CONTINUE", "  fallocate + write + CONTINUE"},
            [&b, n] { return b.minor(k4K, n, Bench::Fill::Fallocate); }, noMinor);
    add("populate-continue", k4K, kGroup,
        {"MADV_POPULATE_WRITE alias", "  write 4 KiB", "  UFFDIO_CONTINUE", "  populate + write + CONTINUE"},
        [&b] { return b.minor(k4K, kGroup, Bench::Fill::Populate); }, noMinor);
    for (size_t n : {1, 64})
        add("pwrite-continue", k4K, n, {"pwrite 4 KiB", "  UFFDIO_CONTINUE", "  pwrite + CONTINUE"},
            [&b, n] { return b.minor(k4K, n, Bench::Fill::Pwrite); }, noMinor);
    for (size_t n : {1, 64})
        add("punch", k4K, n, {"fallocate(PUNCH_HOLE)"}, [&b, n] { return b.punch(k4K, n); });
    addCycles(add, b, noMove);
    add("wake", k4K, 1, {"UFFDIO_WAKE, no waiter (floor)"}, [&b] { return b.wakeFloor(); });
    add("memcpy", k4K, 1, {"memcpy 4 KiB, resident"}, [&b] { return b.copyResident(k4K); });
    add("memcpy", k2M, 1, {"memcpy 2 MiB, resident"}, [&b] { return b.copyResident(k2M); });
    add("copy", k2M, 1, {"UFFDIO_COPY"}, [&b] { return b.copy2m(); }, hugeWhy);
    add("continue", k2M, 1, {"fallocate", "  alias write 2 MiB", "  UFFDIO_CONTINUE", "  fallocate + write + CONTINUE"},
        [&b] { return b.minor(k2M, 1, Bench::Fill::Fallocate); },
        !hugeWhy.empty() ? hugeWhy
                         : (feat & UFFD_FEATURE_MINOR_HUGETLBFS) ? "" : "kernel lacks UFFD_FEATURE_MINOR_HUGETLBFS");
    add("punch", k2M, 1, {"fallocate(PUNCH_HOLE)"}, [&b] { return b.punch(k2M, 1); }, hugeWhy);
    add("cycle-memfd", k2M, 1, cycleRows(k2M, Route::MemfdPunch), [&b] { return b.cycle(k2M, 1, Route::MemfdPunch); },
        hugeWhy);
    add("move-thp", k2M, 1, cycleRows(k2M, Route::PoolMove), [&b] { return b.cycle(k2M, 1, Route::PoolMove); },
        noMove);
    return cases;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

uint64_t threadCpuNs()
{
    timespec ts;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// `trials` trials of every case that runs, alternating between cases.
void runTrials(std::vector<Case>& cases, int trials)
{
    for (int t = 0; t < trials; t++)
        for (size_t j = 0; j < cases.size(); j++) {
            Case& c = cases[(j + size_t(t)) % cases.size()]; // rotate the start: no case always first
            if (!c.skip.empty())
                continue;
            const uint64_t wall = monotonicNs(), cpu0 = threadCpuNs();
            auto ns = c.trial();
            c.onCpu.push_back(double(threadCpuNs() - cpu0) / double(monotonicNs() - wall));
            for (size_t r = 0; r < c.rows.size(); r++)
                c.rows[r].ns.push_back(ns[r]);
        }
}

// One line of the table, and its JSON row. on-cpu: the lowest thread CPU / wall
// time over the case's trials (setup included); well below 100 % means another
// task took the CPU meanwhile.
Json printRow(const Case& c, const std::string& step, const std::vector<double>& v, const std::vector<double>& onCpu)
{
    const double busy = onCpu.empty() ? 1.0 : *std::min_element(onCpu.begin(), onCpu.end());
    const double ns = median(v), lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    const double pps = 1e9 / ns;
    char range[40];
    std::snprintf(range, sizeof range, "%.0f-%.0f", lo, hi);
    std::printf("%-17s %-5s %4zu  %-30s %11.0f %9.0f %17s %9.0f %11.0f %6.0f%%\n", c.name.c_str(), pageName(c.page),
                c.perCall, step.c_str(), pps, ns, range, pps * double(c.page) / 1e6, pps * double(c.page / k4K),
                busy * 100);
    return {{"case", c.name},       {"pageBytes", c.page},   {"pagesPerCall", c.perCall},
            {"step", step.substr(step.find_first_not_of(' '))},
            {"pagesPerSec", pps},   {"nsPerPage", ns},       {"nsPerPageMin", lo},
            {"nsPerPageMax", hi},   {"mbPerSec", pps * double(c.page) / 1e6},
            {"k4EquivPerSec", pps * double(c.page / k4K)},   {"onCpuMin", busy},
            {"trials", v}};
}

// The table: every row of every case (n/a and the reason for a case not run).
void printTable(const std::vector<Case>& cases, std::optional<double> firstUse, Json& rows, Json& skipped)
{
    std::printf("%-17s %-5s %4s  %-30s %11s %9s %17s %9s %11s %7s\n", "case", "page", "/call", "step", "pages/s",
                "ns/page", "ns/page range", "MB/s", "4K-equiv/s", "on-cpu");
    for (const Case& c : cases) {
        if (!c.skip.empty()) {
            std::printf("%-17s %-5s %4zu  n/a: %s\n", c.name.c_str(), pageName(c.page), c.perCall, c.skip.c_str());
            skipped.push_back(
                {{"case", c.name}, {"pageBytes", c.page}, {"pagesPerCall", c.perCall}, {"reason", c.skip}});
            continue;
        }
        if (c.page == k2M && c.name == "copy" && firstUse)
            rows.push_back(printRow(c, "UFFDIO_COPY, first use of pool", {*firstUse}, {}));
        for (const Row& r : c.rows)
            rows.push_back(printRow(c, r.name, r.ns, c.onCpu));
    }
}

// The [selected] word of a sysfs choice file, "?" if none.
std::string sysfsChoice(const char* file)
{
    std::ifstream f(file);
    for (std::string w; f >> w;)
        if (w.front() == '[')
            return w.substr(1, w.size() - 2);
    return "?";
}

// The limit lines: the fastest whole install (a filled page mapped), and the
// fastest install + evict cycle, per page size.
Json printLimits(const std::vector<Case>& cases)
{
    struct Limit {
        const char* key;
        size_t page;
        bool onePerCall;
        bool cycle;
    };
    Json limits = Json::object();
    for (const Limit& l : {Limit{"4K", k4K, false, false}, Limit{"4K_1perCall", k4K, true, false},
                           Limit{"2M", k2M, false, false}, Limit{"4K_cycle", k4K, false, true},
                           Limit{"2M_cycle", k2M, false, true}}) {
        const Case* best = nullptr;
        double bestNs = 0;
        for (const Case& c : cases) {
            const int row = l.cycle ? c.cycleRow : c.installRow;
            if (c.page != l.page || row < 0 || !c.skip.empty() || (l.onePerCall && c.perCall != 1))
                continue;
            const double ns = median(c.rows[size_t(row)].ns);
            if (!best || ns < bestNs) {
                best = &c;
                bestNs = ns;
            }
        }
        if (!best)
            continue;
        const std::string how = best->name + ", " + std::to_string(best->perCall) + " per call";
        std::printf("limit %s%s%s: %.0f pages/s = %.0f 4K-equivalents/s (%s)\n", pageName(l.page),
                    l.onePerCall ? ", 1 page per call" : "", l.cycle ? ", install + evict cycle" : "", 1e9 / bestNs,
                    1e9 / bestNs * double(l.page / k4K), how.c_str());
        limits[l.key] = {{"how", how}, {"pagesPerSec", 1e9 / bestNs}, {"nsPerPage", bestNs}};
    }
    return limits;
}

// The hugetlb pool; the pools of the MOVE cases, and what the kernel gave the THP
// pool (returned as JSON).
Json printPools(const HugePool* pool, const ThpSeen& thp, const std::string& noMove)
{
    if (pool)
        std::printf("hugetlb pool: nr_hugepages %ld before, %ld added for this run (restored at exit)%s\n",
                    pool->before(), pool->added(),
                    pool->freshPages() ? "" : "; pages were already in the pool: the first-use row may be warm");
    if (!noMove.empty()) {
        std::printf("move-pool, move-thp: n/a: %s\n", noMove.c_str());
        return {{"available", false}, {"why", noMove}};
    }
    std::printf("move-pool, move-thp: pools populated (MADV_POPULATE_WRITE) and registered before the timed window, "
                "as many pages as stay resident (3/4 of the region); cycles evict the oldest resident pages\n");
    const std::string thpEnabled = sysfsChoice("/sys/kernel/mm/transparent_hugepage/enabled");
    Json j{{"available", true}, {"thpEnabled", thpEnabled}, {"thpTrials", thp.trials}};
    if (thp.trials == 0)
        return j;
    std::printf("move-thp: THP %s; pool %ld of %ld kB PMD-mapped once populated, region %ld of %ld kB after the "
                "first UFFDIO_MOVE in (AnonHugePages, smaps; lowest of %d trials): %s\n",
                thpEnabled.c_str(), thp.poolKbMin, thp.poolWantKb, thp.regionKbMin, thp.regionWantKb, thp.trials,
                thp.pmdMapped() ? "the 2 MiB pages moved whole"
                                : "the kernel gave small pages (the MOVE rows are 512 4 KiB moves per 2 MiB)");
    j.update({{"poolWantKb", thp.poolWantKb}, {"poolAnonHugeKbMin", thp.poolKbMin}, {"regionWantKb", thp.regionWantKb},
              {"regionAnonHugeKbAfterMoveMin", thp.regionKbMin}, {"pmdMapped", thp.pmdMapped()}});
    return j;
}

} // namespace

int main(int argc, char** argv)
{
    int trials = 5;
    size_t mib = 64;
    npf::bench::CommonOptions common;
    CLI::App app{"npf-uffd-bench: the kernel primitives of the fault path (UFFDIO_COPY, ZEROPAGE, CONTINUE, "
                 "MOVE from a page pool, fallocate, MADV_DONTNEED, memcpy), 4 KiB and 2 MiB pages"};
    app.add_option("--trials", trials, "alternating trials per case; the table shows medians")
        ->check(CLI::Range(1, 100));
    app.add_option("--mib", mib, "region MiB per trial (4 KiB cases: MiB * 256 pages; 2 MiB cases: MiB / 2)")
        ->check(CLI::Range(4, 4096));
    npf::bench::addCommonOptions(app, common);
    app.set_version_flag("--version", npf::cli::versionLine("npf-uffd-bench"));
    CLI11_PARSE(app, argc, argv);

    try {
        npf::bench::pinBenchmark(common);
        std::string why;
        if (!npf::userfaultfdAvailable(&why))
            throwErrno(EPERM, why);
        const auto uffd = Userfaultfd::open(UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_SIGBUS,
                                            UFFD_FEATURE_MISSING_HUGETLBFS | UFFD_FEATURE_MINOR_SHMEM |
                                                UFFD_FEATURE_MINOR_HUGETLBFS | UFFD_FEATURE_MOVE,
                                            "uffd-bench");
        const uint64_t feat = uffd.features();

        Bench b{uffd, mib * 256, mib / 2, {}, {}, {}, {}};
        b.stage = Bench::pattern(kStagePages * k4K, 7, "staging");
        b.src2m = Bench::pattern(k2M, 11, "2 MiB source");
        b.resident = Bench::pattern(mib << 20, 3, "resident buffer");

        std::signal(SIGINT, restoreOnSignal);
        std::signal(SIGTERM, restoreOnSignal);
        std::string hugeWhy =
            (feat & UFFD_FEATURE_MISSING_HUGETLBFS) ? "" : "kernel lacks UFFD_FEATURE_MISSING_HUGETLBFS";
        const std::unique_ptr<HugePool> pool = hugeWhy.empty() ? HugePool::reserve(long(b.pages2m), &hugeWhy) : nullptr;

        std::vector<Case> cases = makeCases(b, feat, hugeWhy);

        // The first use of each pool page can cost more (the host backs guest memory
        // lazily, the guest clears it): one UFFDIO_COPY pass before the trials,
        // reported on its own.
        std::optional<double> firstUse;
        if (pool)
            firstUse = b.copy2m()[0];

        runTrials(cases, trials);

        const std::string shmemThp = sysfsChoice("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
        utsname u{};
        ::uname(&u);
        std::printf("npf-uffd-bench: %s, kernel %s, CPU %s, %d trials, %zu MiB per trial (%zu 4 KiB / %zu 2 MiB "
                    "pages), shmem THP %s\n",
                    npf::bench::cpuModel().c_str(), u.release, common.cpuName().c_str(), trials, mib,
                    b.pages4k, b.pages2m, shmemThp.c_str());
        std::printf("%-17s %-5s %4s  %-30s %11s %9s %17s %9s %11s %7s\n", "case", "page", "/call", "step", "pages/s",
                    "ns/page", "ns/page range", "MB/s", "4K-equiv/s", "on-cpu");
        Json rows = Json::array(), skipped = Json::array();
        printTable(cases, firstUse, rows, skipped);
        const Json limits = printLimits(cases);
        const Json moveInfo = printPools(pool.get(), b.thp, (feat & UFFD_FEATURE_MOVE) ? "" : kNoMove);
        const Json out{{"bench", "uffd"},
                       {"cpuModel", npf::bench::cpuModel()},
                       {"kernel", u.release},
                       {"cpu", common.cpu},
                       {"trials", trials},
                       {"mib", mib},
                       {"uffdFeatures", feat},
                       {"shmemThp", shmemThp},
                       {"hugePagesAdded", pool ? pool->added() : 0},
                       {"limits", limits},
                       {"move", moveInfo},
                       {"rows", rows},
                       {"skipped", skipped}};
        npf::bench::emitJson(out, common.jsonFile);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "npf-uffd-bench: %s\n", e.what());
        return 1;
    }
}
