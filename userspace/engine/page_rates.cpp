#include "npf/page_rates.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "npf/abi.h"

#include "sys/clock.h"
#include "sys/error.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"
#include "sys/thread.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

namespace npf {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kRun = 64;            // pages per UFFDIO_COPY, as npf's pager batches them
constexpr uint64_t kWindowRuns = 4;      // the recycled probe cycles over 4 runs = 1 MiB

double perSecond(uint64_t pages, uint64_t t0) { return double(pages) / (double(monotonicNs() - t0) * 1e-9); }

// Private anonymous memory of 4 KiB pages (no THP), not touched.
MmapArea anonymous(uint64_t bytes, const char* what)
{
    MmapArea a = MmapArea::map(bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, what);
    ::madvise(a.get(), bytes, MADV_NOHUGEPAGE);
    return a;
}

// mmap + one byte written per page + munmap: every page a fresh one from the kernel.
double freshRate(uint64_t pages)
{
    const uint64_t t0 = monotonicNs();
    {
        MmapArea a = anonymous(pages * kPage, "the fresh-page probe");
        volatile uint8_t* p = a.as<uint8_t>();
        for (uint64_t i = 0; i < pages; i++)
            p[i * kPage] = 1;
    }
    return perSecond(pages, t0);
}

// A userfaultfd for faults of user-mode accesses (any process may open one).
Fd userfaultfd()
{
    Fd fd(int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY)));
    if (!fd)
        throwErrno("userfaultfd for the recycled-page probe");
    uffdio_api api{.api = UFFD_API, .features = 0, .ioctls = 0};
    if (::ioctl(fd.get(), UFFDIO_API, &api) < 0)
        throwErrno("UFFDIO_API");
    return fd;
}

// Installs [dst, dst + len) from src with UFFDIO_COPY (all of it: a partial copy goes on).
void copyIn(int uffd, uint8_t* dst, const uint8_t* src, uint64_t len)
{
    for (uint64_t done = 0; done < len;) {
        uffdio_copy c{.dst = uint64_t(dst + done), .src = uint64_t(src + done), .len = len - done, .mode = 0, .copy = 0};
        if (::ioctl(uffd, UFFDIO_COPY, &c) < 0 && errno != EAGAIN)
            throwErrno("UFFDIO_COPY into the recycled-page probe's window");
        if (c.copy > 0)
            done += uint64_t(c.copy);
    }
}

// A MISSING-registered window of `pages` pages, and a run's image.
struct CopyWindow {
    Fd uffd;
    MmapArea window, image;
    CopyWindow(uint64_t pages, const char* what);
};

CopyWindow::CopyWindow(uint64_t pages, const char* what)
    : uffd(userfaultfd()), window(anonymous(pages * kPage, what)), image(anonymous(kRun * kPage, what))
{
    std::memset(image.get(), 0x5a, kRun * kPage);
    uffdio_register reg{.range = {.start = uint64_t(window.get()), .len = window.size()},
                        .mode = UFFDIO_REGISTER_MODE_MISSING, .ioctls = 0};
    if (::ioctl(uffd.get(), UFFDIO_REGISTER, &reg) < 0)
        throwErrno(std::string("UFFDIO_REGISTER ") + what + " (MISSING)");
}

// `pages` pages copied in, kRun at a time, each into a page of its own of
// a window that frees none until the end.
double copiedRate(uint64_t pages)
{
    const uint64_t whole = (pages + kRun - 1) / kRun * kRun;
    CopyWindow w(whole, "the copied-page probe's window");
    const uint64_t t0 = monotonicNs();
    for (uint64_t run = 0; run * kRun < whole; run++)
        copyIn(w.uffd.get(), w.window.as<uint8_t>() + run * kRun * kPage, w.image.as<uint8_t>(), kRun * kPage);
    return perSecond(whole, t0);
}

// `pages` pages installed with UFFDIO_COPY into a MISSING-registered window,
// kRun at a time, each run freed again with MADV_DONTNEED: the kernel hands
// the same few pages back, so this is the rate of recycled pages. With
// `touch`, each page is read once through the window before it is freed.
double recycledRate(uint64_t pages, bool touch)
{
    const uint64_t runBytes = kRun * kPage;
    CopyWindow w(kWindowRuns * kRun, "the recycled-page probe's window");
    const uint64_t t0 = monotonicNs();
    for (uint64_t run = 0; run * kRun < pages; run++) {
        uint8_t* dst = w.window.as<uint8_t>() + (run % kWindowRuns) * runBytes;
        copyIn(w.uffd.get(), dst, w.image.as<uint8_t>(), runBytes);
        if (touch)
            for (uint64_t i = 0; i < kRun; i++)
                (void)static_cast<volatile uint8_t*>(dst)[i * kPage + 64]; // a volatile read: not elided
        if (::madvise(dst, runBytes, MADV_DONTNEED) < 0)
            throwErrno("MADV_DONTNEED in the recycled-page probe");
    }
    return perSecond((pages + kRun - 1) / kRun * kRun, t0);
}

} // namespace

std::string toJson(const PageRates& r)
{
    nlohmann::ordered_json j{{"cpu", r.cpu},
                             {"pages", r.pages},
                             {"freshMPagesPerSec", r.freshPerSec / 1e6},
                             {"copiedMPagesPerSec", r.copiedPerSec / 1e6},
                             {"recycledMPagesPerSec", r.recycledPerSec / 1e6},
                             {"touchedMPagesPerSec", r.touchedPerSec / 1e6},
                             {"firstTouchNs", r.firstTouchNs()}};
    if (!r.error.empty())
        j["error"] = r.error;
    return j.dump();
}

double installSeconds(const PageRates& r, uint64_t pageSize, bool reserved)
{
    if (r.copiedPerSec <= 0 || r.recycledPerSec <= 0)
        return 0;
    if (pageSize > NPF_PAGE_SIZE)
        return reserved ? 0 : double(pageSize / NPF_PAGE_SIZE) / r.copiedPerSec;
    return reserved ? 1 / r.recycledPerSec : 1 / r.copiedPerSec;
}

double boundOfTheMoment(uint64_t reached, double seconds, uint64_t pages, double perPage, uint32_t perPageDatagrams)
{
    if (reached == 0 || seconds <= 0)
        return 0;
    const double rate = double(reached) / seconds, cold = double(pages) * perPage;
    const double b = cold >= seconds ? seconds / perPage * perPageDatagrams
                                     : double(pages) * perPageDatagrams + rate * (seconds - cold);
    return std::min(double(reached), b + NPF_POST_RING_SIZE);
}

std::string PageRates::line() const
{
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "fresh %.3f M pages/s, copied in %.3f M pages/s, recycled %.3f M pages/s, recycled + first touch "
                  "%.3f M pages/s (a first touch %.1f us)",
                  freshPerSec / 1e6, copiedPerSec / 1e6, recycledPerSec / 1e6, touchedPerSec / 1e6,
                  firstTouchNs() / 1e3);
    return error.empty() ? buf : std::string(buf) + " (" + error + ")";
}

PageRates measurePageRates(uint64_t bytes, int cpu)
{
    PageRates r;
    r.cpu = cpu;
    r.pages = bytes / kPage;
    std::thread t([&] {
        if (cpu >= 0)
            npf::pinThread(cpu, "page-rate probe");
        try {
            // Copied first: the pages the kernel has at hand now, as a
            // receiver starting now would get them (the fresh probe frees
            // its pages, which a later probe would get back).
            r.copiedPerSec = copiedRate(r.pages);
            r.freshPerSec = freshRate(r.pages);
            r.recycledPerSec = recycledRate(r.pages, false);
            r.touchedPerSec = recycledRate(r.pages, true);
        } catch (const std::exception& e) {
            r.error = e.what();
        }
    });
    t.join();
    return r;
}

} // namespace npf
