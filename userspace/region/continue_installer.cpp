#include "region/continue_installer.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "region/backoff.h"
#include "region/page_io.h"
#include "region/page_state.h"
#include "region/patch_plan.h"
#include "region/spill.h"
#include "region/uffd.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/mmap_area.h"

namespace npf {

void ContinueInstaller::install(const InstallBatch& b, BatchTiming* t) noexcept
{
    for (size_t k = 0; k < b.size(); ++k) {
        const uint64_t page = b.pages[k];
        const bool saved = state_.saved(page);
        const char* what = nullptr;
        int rc = fill(b, k, &what);
        if (t)
            t->imageReady = monotonicNs();
        if (!rc) {
            rc = map(page, t);
            what = "UFFDIO_CONTINUE";
        }
        if (t)
            t->copyDone = monotonicNs();
        b.status[k] = rc;
        if (rc) {
            c_.add<&RegionStats::errors>();
            NPF_WARN_RL("region %s: installing 2 MiB page %llu: %s: %s", name_.c_str(),
                        static_cast<unsigned long long>(page), what, std::strerror(-rc));
            // A page not installed leaves nothing in the page cache: the next
            // attempt starts from a fresh zeroed page.
            (void)io_.punch(page, 1);
            continue;
        }
        state_.markInstalled(page);
        c_.add<&RegionStats::pagesInstalled>();
        if (t)
            ++t->pages;
        if (saved) {
            state_.clearSaved(page);
            c_.add<&RegionStats::restored>();
            spill_.drop(io_.bytes(page), io_.bytes(1));
        }
    }
}

int ContinueInstaller::fill(const InstallBatch& b, size_t k, const char** what) noexcept
{
    const uint64_t page = b.pages[k];
    const off_t off = static_cast<off_t>(io_.bytes(page));
    uint8_t* a = alias_.as<uint8_t>() + off;
    *what = "fallocate (is the huge page pool empty? /proc/sys/vm/nr_hugepages)";
    if (::fallocate(io_.memfd(), 0, off, static_cast<off_t>(io_.bytes(1))) != 0)
        return -errno;
    if (state_.saved(page)) {
        *what = "mapping it in the alias (the client punched it)";
        // A client's alias maps a page of the page cache once a user access
        // faulted it in (MINOR, PageIo::write); the kernel's write below
        // would fail with EFAULT on an unmapped one.
        if (int rc = io_.write(a, [&] { (void)*static_cast<volatile uint8_t*>(a); }))
            return rc;
        *what = "reading its saved content from the spill file";
        if (int rc = spill_.load(io_.bytes(page), a, io_.bytes(1)))
            return rc;
    }
    // A client that punched the page since the fallocate: -EFAULT (its
    // memory is written under the fault guard), never a page allocated by
    // the write.
    *what = "writing its payloads (the client punched the page)";
    return b.begin ? io_.write(a, [&] { plan_.applyTo(a, b.begin[k], b.end[k]); }) : 0;
}

int ContinueInstaller::map(uint64_t page, BatchTiming* t) noexcept
{
    long c;
    Backoff backoff;
    do
        c = uffd_.continueRange(io_.addr(page), io_.bytes(1), nullptr);
    while (c == -EAGAIN && backoff.again());
    c_.add<&RegionStats::copyCalls>();
    if (t)
        ++t->copies;
    if (c == -EEXIST)
        c_.add<&RegionStats::eexist>(); // mapped already: what the page cache holds is what we wrote
    return c >= 0 || c == -EEXIST ? 0 : static_cast<int>(c);
}

} // namespace npf
