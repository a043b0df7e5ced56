#include "region/copy_installer.h"

#include <cstring>

#include "region/backoff.h"
#include "region/page_io.h"
#include "region/page_state.h"
#include "region/patch_plan.h"
#include "region/region_internal.h"
#include "region/spill.h"
#include "region/uffd.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/mmap_area.h"

namespace npf {

void CopyInstaller::install(const InstallBatch& b, BatchTiming* t) noexcept
{
    for (size_t i = 0, j; i < b.size(); i = j) {
        j = i + 1;
        while (j < b.size() && j - i < batchPages_ && b.pages[j] == b.pages[j - 1] + 1)
            ++j;
        const InstallBatch run = b.sub(i, j - i);
        if (int err = buildImages(run)) {
            c_.add<&RegionStats::errors>();
            NPF_WARN_RL("region %s: reading saved pages from the spill file: %s", name_.c_str(), std::strerror(-err));
            for (size_t k = 0; k < run.size(); ++k)
                run.status[k] = err;
            continue;
        }
        if (t)
            t->imageReady = monotonicNs();
        copy(run, t);
        if (t)
            t->copyDone = monotonicNs();
        dropRestored(run);
    }
}

int CopyInstaller::buildImages(const InstallBatch& run) noexcept
{
    uint8_t* stg = staging_.as<uint8_t>();
    for (size_t k = 0; k < run.size();) {
        const bool saved = state_.saved(run.pages[k]);
        size_t m = k + 1;
        while (m < run.size() && state_.saved(run.pages[m]) == saved)
            ++m;
        uint8_t* dst = stg + io_.bytes(k);
        if (!saved)
            std::memset(dst, 0, io_.bytes(m - k));
        else if (int err = spill_.load(io_.bytes(run.pages[k]), dst, io_.bytes(m - k)))
            return err;
        k = m;
    }
    if (run.begin)
        for (size_t k = 0; k < run.size(); ++k)
            plan_.applyTo(stg + io_.bytes(k), run.begin[k], run.end[k]);
    return 0;
}

void CopyInstaller::copy(const InstallBatch& run, BatchTiming* t) noexcept
{
    const uint32_t shift = io_.pageShift();
    const uint8_t* stg = staging_.as<uint8_t>();
    uint8_t* dst = io_.addr(run.pages[0]);
    const uint64_t len = io_.bytes(run.size());
    uint64_t done = 0;
    Backoff backoff;
    while (done < len) {
        int64_t copied = 0;
        long rc = uffd_.copy(dst + done, stg + done, len - done, &copied);
        c_.add<&RegionStats::copyCalls>();
        if (t)
            ++t->copies;
        const uint64_t whole = static_cast<uint64_t>(copied) & ~(io_.bytes(1) - 1);
        for (uint64_t b = done; b < done + whole; b += io_.bytes(1)) {
            const size_t k = b >> shift;
            state_.markInstalled(run.pages[k]);
            run.status[k] = 0;
        }
        c_.add<&RegionStats::pagesInstalled>(whole >> shift);
        if (t)
            t->pages += static_cast<uint32_t>(whole >> shift);
        done += whole;
        if (rc >= 0)
            break;
        const size_t k = done >> shift; // the page the ioctl stopped at
        if (rc == -EEXIST) {
            run.status[k] = onExisting(run, k);
            done += io_.bytes(1);
            continue;
        }
        if (rc == -EAGAIN && backoff.again())
            continue;
        c_.add<&RegionStats::errors>();
        NPF_WARN_RL("region %s: UFFDIO_COPY of %llu pages at page %llu: %s", name_.c_str(),
                    static_cast<unsigned long long>((len - done) >> shift),
                    static_cast<unsigned long long>(run.pages[k]), std::strerror(static_cast<int>(-rc)));
        for (size_t q = k; q < run.size(); ++q)
            run.status[q] = static_cast<int>(rc);
        break;
    }
}

// Keeps what is there and patches our pieces in.
int CopyInstaller::onExisting(const InstallBatch& run, size_t k) noexcept
{
    const uint64_t page = run.pages[k];
    c_.add<&RegionStats::eexist>();
    int rc = io_.patch(plan_, page, run.piecesBegin(k), run.piecesEnd(k));
    state_.markInstalled(page);
    uffd_.wake(io_.addr(page), io_.bytes(1));
    return rc;
}

void CopyInstaller::dropRestored(const InstallBatch& run) noexcept
{
    auto restored = [&](size_t k) { return state_.present(run.pages[k]) && state_.saved(run.pages[k]); };
    for (size_t k = 0; k < run.size();) {
        if (!restored(k)) {
            ++k;
            continue;
        }
        size_t m = k;
        while (m < run.size() && restored(m) && run.pages[m] == run.pages[k] + (m - k)) {
            state_.clearSaved(run.pages[m]);
            ++m;
        }
        c_.add<&RegionStats::restored>(m - k);
        spill_.drop(io_.bytes(run.pages[k]), io_.bytes(m - k));
        k = m;
    }
}

} // namespace npf
