#include "region/copy_installer.h"

#include <algorithm>
#include <cstring>

#include "region/backoff.h"
#include "region/page_io.h"
#include "region/page_pool.h"
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
        if (pool_)
            if (int err = pool_.refill(j - i)) {
                c_.add<&RegionStats::errors>();
                NPF_WARN_RL("region %s: fresh pages for the page pool: %s", name_.c_str(), std::strerror(-err));
            }
        const size_t fromPool = std::min<size_t>(j - i, pool_.available());
        if (fromPool)
            installRun(b.sub(i, fromPool), pool_.next(fromPool), true, t);
        if (fromPool < j - i) // no pool, or it could not be refilled: fresh pages copied in
            installRun(b.sub(i + fromPool, j - i - fromPool), staging_.as<uint8_t>(), false, t);
    }
}

void CopyInstaller::installRun(const InstallBatch& run, uint8_t* images, bool move, BatchTiming* t) noexcept
{
    if (int err = buildImages(run, images)) {
        c_.add<&RegionStats::errors>();
        NPF_WARN_RL("region %s: reading saved pages from the spill file: %s", name_.c_str(), std::strerror(-err));
        for (size_t k = 0; k < run.size(); ++k)
            run.status[k] = err;
        return;
    }
    if (t)
        t->imageReady = monotonicNs();
    const bool leftovers = put(run, images, move, t);
    if (move)
        pool_.consumed(run.size(), leftovers);
    if (t)
        t->copyDone = monotonicNs();
    dropRestored(run);
}

int CopyInstaller::buildImages(const InstallBatch& run, uint8_t* images) noexcept
{
    for (size_t k = 0; k < run.size();) {
        const bool saved = state_.saved(run.pages[k]);
        size_t m = k + 1;
        while (m < run.size() && state_.saved(run.pages[m]) == saved)
            ++m;
        uint8_t* dst = images + io_.bytes(k);
        if (!saved)
            std::memset(dst, 0, io_.bytes(m - k));
        else if (int err = spill_.load(io_.bytes(run.pages[k]), dst, io_.bytes(m - k)))
            return err;
        k = m;
    }
    if (run.begin)
        for (size_t k = 0; k < run.size(); ++k)
            plan_.applyTo(images + io_.bytes(k), run.begin[k], run.end[k]);
    return 0;
}

bool CopyInstaller::put(const InstallBatch& run, uint8_t* images, bool move, BatchTiming* t) noexcept
{
    const uint32_t shift = io_.pageShift();
    uint8_t* dst = io_.addr(run.pages[0]);
    const uint64_t len = io_.bytes(run.size());
    uint64_t done = 0;
    bool leftovers = false;
    Backoff backoff;
    while (done < len) {
        int64_t got = 0;
        long rc = move ? uffd_.move(dst + done, images + done, len - done, &got)
                       : uffd_.copy(dst + done, images + done, len - done, &got);
        if (move)
            c_.add<&RegionStats::moveCalls>();
        else
            c_.add<&RegionStats::copyCalls>();
        if (t)
            ++t->copies;
        const uint64_t whole = static_cast<uint64_t>(got) & ~(io_.bytes(1) - 1);
        for (uint64_t b = done; b < done + whole; b += io_.bytes(1)) {
            const size_t k = b >> shift;
            state_.markInstalled(run.pages[k]);
            run.status[k] = 0;
        }
        c_.add<&RegionStats::pagesInstalled>(whole >> shift);
        if (move)
            c_.add<&RegionStats::poolInstalls>(whole >> shift);
        if (t)
            t->pages += static_cast<uint32_t>(whole >> shift);
        done += whole;
        if (rc >= 0)
            break;
        const size_t k = done >> shift; // the page the ioctl stopped at
        if (rc == -EEXIST) {
            run.status[k] = onExisting(run, k);
            leftovers = true;
            done += io_.bytes(1);
            continue;
        }
        if (rc == -EAGAIN && backoff.again())
            continue;
        c_.add<&RegionStats::errors>();
        NPF_WARN_RL("region %s: %s of %llu pages at page %llu: %s", name_.c_str(), move ? "UFFDIO_MOVE" : "UFFDIO_COPY",
                    static_cast<unsigned long long>((len - done) >> shift),
                    static_cast<unsigned long long>(run.pages[k]), std::strerror(static_cast<int>(-rc)));
        for (size_t q = k; q < run.size(); ++q)
            run.status[q] = static_cast<int>(rc);
        return true;
    }
    return leftovers;
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
