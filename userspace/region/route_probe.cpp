#include "region/route_probe.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>

#include "npf/abi.h"
#include "region/page_pool.h"
#include "region/uffd.h"
#include "sys/clock.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/mmap_area.h"

namespace npf {
namespace {

constexpr uint64_t kPage = 4096;
// The probe touches its windows in user mode only: any process may run it
// (npf::Client in delegated mode), and the cycles cost the same.
constexpr int kProbeFlags = UFFD_USER_MODE_ONLY;
constexpr uint64_t kRun = 64;       // pages per ioctl, as the pager batches them
constexpr uint64_t kRuns = 16;      // the window: 1024 pages
constexpr uint64_t kResident = 8;   // runs resident: half the window, as under a budget
constexpr uint64_t kPiece = 1400;   // bytes of payload written into each page image
constexpr int kTrials = 2;          // per route, alternating; the cheaper trial counts

uint8_t* runAt(const MmapArea& a, uint64_t run) { return a.as<uint8_t>() + run * kRun * kPage; }

// Writes a payload into each page of the run's images at `images`.
void writeImages(uint8_t* images, uint64_t step)
{
    for (uint64_t p = 0; p < kRun; p++)
        std::memset(images + p * kPage + 64, static_cast<int>(step), kPiece);
}

// Runs op(done, left, &got) until the whole run is through: an ioctl that
// stops short (EAGAIN, a partial count) goes on where it stopped.
template <class Op>
void wholeRun(const char* what, Op&& op)
{
    for (uint64_t done = 0; done < kRun * kPage;) {
        int64_t got = 0;
        const long rc = op(done, kRun * kPage - done, &got);
        if (rc < 0 && rc != -EAGAIN)
            throwErrno(static_cast<int>(-rc), what);
        done += static_cast<uint64_t>(std::max<int64_t>(got, 0));
    }
}

// One route's steady cycle, ns per page: kResident runs warm up, the window
// turns over once (every page has been through the cycle), then one more
// turn is timed.
template <class Install, class Evict>
double cycle(Install&& install, Evict&& evict)
{
    uint64_t t0 = 0;
    const uint64_t timed = kRuns, untimed = kResident + kRuns;
    for (uint64_t step = 0; step < untimed + timed; step++) {
        if (step == untimed)
            t0 = monotonicNs();
        if (step >= kResident)
            evict((step - kResident) % kRuns);
        install(step % kRuns, step);
    }
    return static_cast<double>(monotonicNs() - t0) / static_cast<double>(timed * kRun);
}

double copyCycle()
{
    Userfaultfd uffd = Userfaultfd::open(0, 0, "the 4 KiB route probe", kProbeFlags);
    MmapArea window = mapAnonymous(kRuns * kRun * kPage, kPage, "the 4 KiB route probe's window");
    MmapArea staging = mapAnonymous(kRun * kPage, kPage, "the 4 KiB route probe's staging");
    std::memset(staging.get(), 0, staging.size());
    uffd.registerRange(window.get(), window.size(), UFFDIO_REGISTER_MODE_MISSING, "the 4 KiB route probe");
    return cycle(
        [&](uint64_t run, uint64_t step) {
            writeImages(staging.as<uint8_t>(), step);
            wholeRun("UFFDIO_COPY in the 4 KiB route probe", [&](uint64_t done, uint64_t left, int64_t* got) {
                return uffd.copy(runAt(window, run) + done, staging.as<uint8_t>() + done, left, got);
            });
        },
        [&](uint64_t run) {
            if (::madvise(runAt(window, run), kRun * kPage, MADV_DONTNEED) != 0)
                throwErrno("MADV_DONTNEED in the 4 KiB route probe");
        });
}

double poolCycle()
{
    Userfaultfd uffd = Userfaultfd::open(UFFD_FEATURE_MOVE, 0, "the 4 KiB route probe", kProbeFlags);
    MmapArea window = mapAnonymous(kRuns * kRun * kPage, kPage, "the 4 KiB route probe's window");
    // Enough pages for the resident runs and one more, faulted in before the registration.
    const uint64_t capacity = (kResident + 1) * kRun;
    MmapArea pool = mapAnonymous(capacity * kPage, kPage, "the 4 KiB route probe's pool");
    populate(pool.as<uint8_t>(), capacity, NPF_PAGE_SHIFT);
    uffd.registerRange(window.get(), window.size(), UFFDIO_REGISTER_MODE_MISSING, "the 4 KiB route probe");
    uffd.registerRange(pool.get(), pool.size(), UFFDIO_REGISTER_MODE_MISSING, "the 4 KiB route probe's pool");
    uint64_t top = capacity; // pages [0, top) of the pool hold pages
    auto move = [&](uint8_t* dst, uint8_t* src) {
        wholeRun("UFFDIO_MOVE in the 4 KiB route probe", [&](uint64_t done, uint64_t left, int64_t* got) {
            return uffd.move(dst + done, src + done, left, got);
        });
    };
    return cycle(
        [&](uint64_t run, uint64_t step) {
            top -= kRun;
            uint8_t* images = pool.as<uint8_t>() + top * kPage;
            writeImages(images, step);
            move(runAt(window, run), images);
        },
        [&](uint64_t run) {
            move(pool.as<uint8_t>() + top * kPage, runAt(window, run));
            top += kRun;
        });
}

} // namespace

RouteProbe probeRoutes4k()
{
    RouteProbe p;
    const bool canMove = userfaultfdHasMove();
    try {
        for (int t = 0; t < kTrials; t++) {
            const double c = copyCycle();
            p.copyNs = t == 0 ? c : std::min(p.copyNs, c);
            if (canMove) {
                const double m = poolCycle();
                p.poolNs = t == 0 ? m : std::min(p.poolNs, m);
            }
        }
    } catch (const std::exception& e) {
        p.error = e.what();
    }
    return p;
}

const RouteProbe& routes4k()
{
    static const RouteProbe p = [] {
        RouteProbe r = probeRoutes4k();
        if (!r.error.empty())
            NPF_WARN("4 KiB route probe: %s; regions copy their pages in", r.error.c_str());
        else
            NPF_DEBUG("4 KiB route probe: copy in + free %.2f us per page, the page pool's moves %.2f us: %s",
                      r.copyNs / 1e3, r.poolNs / 1e3, r.poolFaster() ? "the page pool" : "copy in + free");
        return r;
    }();
    return p;
}

} // namespace npf
