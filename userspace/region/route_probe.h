// Which way of bringing 4 KiB pages in and out is cheaper on this host:
// copying each page in (UFFDIO_COPY, the kernel takes a page off its free
// lists) and freeing it on eviction (MADV_DONTNEED), or moving recycled
// pages of a pool in and back out (UFFDIO_MOVE, PagePool). It depends on
// the hypervisor more than on the kernel: measured on the VMs npf runs on,
// the pool's cycle cost 1.03 µs against 2.80 µs for copy + free on one
// host (2026-12-02), and 8.7 µs against 2.5 µs on another (2026-12-05),
// whose hypervisor shadows the guest's page tables, so that the pager's
// first write into a pool page that just moved back is an exit to the host
// (docs/architecture.md, "Where a region's pages come from").
//
// So RegionMemory::Auto asks: a few milliseconds, once per process, on the
// thread that builds the first 4 KiB region, of both cycles as a pager under
// a budget runs them (pages rotating through a pool, images written where
// each route writes them, runs of 64).
#pragma once

#include <string>

namespace npf {

struct RouteProbe {
    double copyNs = 0; // per page: image in staging, UFFDIO_COPY in, MADV_DONTNEED out
    double poolNs = 0; // per page: image in a pool page, UFFDIO_MOVE in, UFFDIO_MOVE back (0: no UFFDIO_MOVE)
    std::string error; // the probe failed (then copy is the pick)

    // True if the pool's cycle is the cheaper one here.
    bool poolFaster() const noexcept { return error.empty() && poolNs > 0 && poolNs < copyNs; }
};

// Runs both cycles now (about 3 × 1024 pages of each).
RouteProbe probeRoutes4k();

// probeRoutes4k()'s answer, measured on the first call and kept for the
// life of the process (thread-safe).
const RouteProbe& routes4k();

} // namespace npf
