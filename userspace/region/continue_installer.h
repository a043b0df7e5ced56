// Installs missing 2 MiB pages with no image copy: fallocate puts a zeroed
// page into the page cache, payloads (and saved content, if any) are written
// into it through the unregistered alias mapping, and UFFDIO_CONTINUE maps it
// (MINOR mode) and wakes the faulting threads: the kernel's zeroing is the
// only full pass. Called with its region's lock held.
#pragma once

#include <cstdint>
#include <string>

#include "region/batch_timing.h"
#include "region/install_batch.h"
#include "region/region_parts.h"

namespace npf {

class ContinueInstaller {
public:
    // Installs into the mapping of `io` through `uffd` (registered over it
    // in MINOR mode); `alias` maps the same memfd, not registered.
    // Keeps references: the region's parts, filled in before the first install.
    ContinueInstaller(const RegionParts& parts, const MmapArea& alias) noexcept
        : uffd_(parts.uffd), io_(parts.io), alias_(alias), state_(parts.state), spill_(parts.spill),
          plan_(parts.plan), c_(parts.counters), name_(parts.name)
    {
    }

    void install(const InstallBatch& b, BatchTiming* t) noexcept;

private:
    // Puts pages[k]'s content into the page cache; 0 or -errno, *what says which step failed.
    int fill(const InstallBatch& b, size_t k, const char** what) noexcept;
    // UFFDIO_CONTINUE of one page; 0 (mapped, or mapped already) or -errno.
    int map(uint64_t page, BatchTiming* t) noexcept;

    const Userfaultfd& uffd_;
    const PageIo& io_;
    const MmapArea& alias_;
    PageState& state_;
    const SpillFile& spill_;
    const PatchPlan& plan_;
    RegionCounters& c_;
    const std::string& name_;
};

} // namespace npf
