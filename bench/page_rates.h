// The machine's page-allocation rates of the moment: the limits of the fault
// path here, now. On a VM with free page reporting a fresh page can cost 15
// times a recycled one, and which one a run gets varies from run to run, so
// npf-bench measures both at its start and again at its end.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace npf::bench {

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

    nlohmann::ordered_json toJson() const;
    std::string line() const; // "fresh 0.26 M pages/s, copied in 0.4 M pages/s, recycled 0.71 M pages/s, ..."
    // ns a receiver's first access to an installed page adds (0: unknown).
    double firstTouchNs() const
    {
        return touchedPerSec > 0 && recycledPerSec > touchedPerSec ? 1e9 / touchedPerSec - 1e9 / recycledPerSec : 0;
    }
};

// Both probes, `bytes` of 4 KiB pages each, on a thread pinned to `cpu` (-1: not pinned).
PageRates measurePageRates(uint64_t bytes, int cpu);

} // namespace npf::bench
