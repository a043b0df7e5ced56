// The machine's page-allocation rates of the moment: the limits of the fault
// path here, now. On a VM with free page reporting a fresh page can cost 15
// times a recycled one, and which one a run gets varies from run to run; on
// a host that shadows the guest's page tables a receiver's first touch of a
// new 4 KiB page is an exit. npf-bench measures them at its start and end,
// npf-recv at its start, for the bound its summary prints.
#pragma once

#include <cstdint>
#include <string>

namespace npf {

struct PageRates {
    int cpu = -1;              // where it ran (-1: not pinned)
    uint64_t pages = 0;        // 4 KiB pages per probe
    double freshPerSec = 0;    // mmap, write one byte per page, munmap
    // UFFDIO_COPY in runs of 64 over a window as large as the probe, never
    // freed until the end: pages the kernel takes off its free lists for
    // an install, as npf's copy route does (no page fault per page, which on
    // a VM can be an exit of its own).
    double copiedPerSec = 0;
    double recycledPerSec = 0; // UFFDIO_COPY in runs of 64 + MADV_DONTNEED, over a 1 MiB window
    // The same, each page read once through its new mapping between the
    // copy and the free, as a receiver reads what was installed: on a VM
    // whose hypervisor shadows the guest's page tables the first access to
    // a new page table entry is an exit to the host, and it, not the
    // allocation, is then the cost of a 4 KiB install.
    double touchedPerSec = 0;
    std::string error;         // a probe failed (no userfaultfd, ...): its rate is 0

    std::string line() const; // "fresh 0.26 M pages/s, copied in 0.4 M pages/s, recycled 0.71 M pages/s, ..."
    // ns a receiver's first access to an installed page adds (0: unknown).
    double firstTouchNs() const
    {
        return touchedPerSec > 0 && recycledPerSec > touchedPerSec ? 1e9 / touchedPerSec - 1e9 / recycledPerSec : 0;
    }
};

// Every probe, `bytes` of 4 KiB pages each, on a thread pinned to `cpu` (-1: not pinned).
PageRates measurePageRates(uint64_t bytes, int cpu);

// The rates as one JSON object: {"cpu", "pages", "freshMPagesPerSec", ...}.
std::string toJson(const PageRates& r);

// Seconds the pager pays for a first install of one page of `pageSize`
// bytes in a cold region, from the rates of the moment: 4 KiB, a page copied
// in from the kernel's free lists (copiedPerSec), or with a reserve a
// recycled one; 2 MiB, 512 of those (the host backs a huge page as 512 small
// ones), none with a reserve. The receiver's first touch of each page is
// left out: a worker pays it, on another CPU. 0: unknown.
double installSeconds(const PageRates& r, uint64_t pageSize, bool reserved);

// The bound of the moment: datagrams a receiver could have written if
// bringing in the region's pages were its only cost. A cold region needs
// `pages` first installs (one pass over it, or fewer for a short burst) at
// `perPage` seconds each; `perPage * pages` of the burst's `seconds` go to
// them at `perPageDatagrams` datagrams a page, the rest arrives into
// resident pages at the offered rate; and the posted buffers
// (NPF_POST_RING_SIZE) hold as many datagrams more, placed after the burst.
// At most `reached`.
double boundOfTheMoment(uint64_t reached, double seconds, uint64_t pages, double perPage, uint32_t perPageDatagrams);

} // namespace npf
