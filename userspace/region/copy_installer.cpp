#include "region/copy_installer.h"

#include <algorithm>
#include <cstring>

#include "region/backoff.h"
#include "region/client_installer.h"
#include "region/page_io.h"
#include "region/page_pool.h"
#include "region/page_reserve.h"
#include "region/page_state.h"
#include "region/patch_plan.h"
#include "region/remote_installer.h"
#include "region/spill.h"
#include "region/uffd.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/mmap_area.h"

namespace npf {

void CopyInstaller::install(const InstallBatch& b, BatchTiming* t) noexcept
{
    settle();
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
            installRun(b.sub(i, fromPool), pool_.next(fromPool), Via::Move, t);
        if (fromPool == j - i)
            continue;
        // No pool, or it could not be refilled: fresh pages copied in.
        const InstallBatch rest = b.sub(i + fromPool, j - i - fromPool);
        if (client_ && client_->ready()) {
            installRun(rest, client_->buffer(), Via::Client, t);
            continue;
        }
        for (size_t k = 0, n; k < rest.size(); k += n) {
            n = rest.size() - k;
            if (remote_ && remote_->ready()) {
                n = std::min<size_t>(n, remote_->images());
                installRun(rest.sub(k, n), remote_->buffer(), Via::Remote, t);
            } else {
                reserve_.release(n);
                installRun(rest.sub(k, n), staging_.as<uint8_t>(), Via::Copy, t);
            }
        }
    }
}

void CopyInstaller::settle() noexcept
{
    if (!lateLen_ || !(client_ ? client_->settled() : remote_->settled()))
        return;
    state_.unprotect(lateOffset_, lateLen_);
    lateLen_ = 0;
}

void CopyInstaller::installRun(const InstallBatch& run, uint8_t* images, Via via, BatchTiming* t) noexcept
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
    askedClient_ = via == Via::Client || via == Via::Remote;
    if (via == Via::Remote) {
        askRemote(run);
        via = Via::Copy; // what the client did not install, and a check of what it did
    }
    const bool leftovers = put(run, images, via, t);
    claimed_ = 0;
    askedClient_ = false;
    if (via == Via::Move)
        pool_.consumed(run.size(), leftovers);
    if (t)
        t->copyDone = monotonicNs();
    dropRestored(run);
}

// A new page's image holds zeros but where its payloads go: with one piece
// (a datagram in the page, the common case) only the bytes around it are
// zeroed, the piece's are written after; else the whole page. (A pool page
// comes with its old content: every byte of it is written.)
void CopyInstaller::zeroAround(uint8_t* page, size_t begin, size_t end) const noexcept
{
    const uint64_t size = io_.bytes(1);
    if (end - begin != 1) {
        std::memset(page, 0, size);
        return;
    }
    const PagePiece& piece = plan_.pieces()[begin];
    std::memset(page, 0, piece.pageOff);
    std::memset(page + piece.pageOff + piece.len, 0, size - piece.pageOff - piece.len);
}

int CopyInstaller::buildImages(const InstallBatch& run, uint8_t* images) noexcept
{
    for (size_t k = 0; k < run.size();) {
        const bool saved = state_.saved(run.pages[k]);
        size_t m = k + 1;
        while (m < run.size() && state_.saved(run.pages[m]) == saved)
            ++m;
        uint8_t* dst = images + io_.bytes(k);
        if (!saved && run.begin)
            for (size_t p = k; p < m; ++p)
                zeroAround(images + io_.bytes(p), run.begin[p], run.end[p]);
        else if (!saved)
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

bool CopyInstaller::put(const InstallBatch& run, uint8_t* images, Via via, BatchTiming* t) noexcept
{
    const uint32_t shift = io_.pageShift();
    const uint64_t len = io_.bytes(run.size());
    uint64_t done = 0;
    bool leftovers = false, reinstalled = false;
    Backoff backoff;
    while (done < len) {
        int64_t got = 0;
        long rc = putOnce(run, images, via, done, len, &got);
        if (t)
            ++t->copies;
        const uint64_t whole = static_cast<uint64_t>(got) & ~(io_.bytes(1) - 1);
        for (uint64_t b = done; b < done + whole; b += io_.bytes(1)) {
            const size_t k = b >> shift;
            state_.markInstalled(run.pages[k]);
            run.status[k] = 0;
        }
        c_.add<&RegionStats::pagesInstalled>(whole >> shift);
        if (via == Via::Move) {
            c_.add<&RegionStats::poolInstalls>(whole >> shift);
        } else if (via == Via::Client) {
            c_.add<&RegionStats::clientInstalls>(whole >> shift);
            // The copy into the client's mapping woke the client's waiters;
            // a thread of ours that faulted on these pages waits on our uffd.
            if (whole)
                uffd_.wake(io_.addr(run.pages[0]) + done, whole);
        } else if (client_ || remote_) {
            c_.add<&RegionStats::clientFallbacks>(whole >> shift);
        }
        if (t)
            t->pages += static_cast<uint32_t>(whole >> shift);
        done += whole;
        if (rc >= 0)
            break;
        const size_t k = done >> shift; // the page the ioctl stopped at
        if (rc == -EEXIST) {
            run.status[k] = onExisting(run, k);
            // Present to the ioctl, gone to our write: a mapping still maps
            // a page the page cache no longer holds (seen with 2 MiB pages
            // while the huge page pool shrank). Punched (every mapping's
            // entry with it), the copy is tried again, once.
            if (run.status[k] == -EFAULT && !reinstalled) {
                reinstalled = true;
                c_.add<&RegionStats::vanished>();
                if (io_.punch(run.pages[k], 1) == 0)
                    continue;
            }
            leftovers = true;
            done += io_.bytes(1);
            continue;
        }
        if (via == Via::Client) {
            clientRefused(run, k, rc);
            via = Via::Copy;
            continue;
        }
        if (rc == -EAGAIN && backoff.again())
            continue;
        c_.add<&RegionStats::errors>();
        NPF_WARN_RL("region %s: %s of %llu pages at page %llu: %s", name_.c_str(),
                    via == Via::Move ? "UFFDIO_MOVE" : "UFFDIO_COPY",
                    static_cast<unsigned long long>((len - done) >> shift),
                    static_cast<unsigned long long>(run.pages[k]), std::strerror(static_cast<int>(-rc)));
        for (size_t q = k; q < run.size(); ++q)
            run.status[q] = static_cast<int>(rc);
        return true;
    }
    return leftovers;
}

long CopyInstaller::putOnce(const InstallBatch& run, uint8_t* images, Via via, uint64_t done, uint64_t len,
                            int64_t* got) noexcept
{
    switch (via) {
    case Via::Move:
        c_.add<&RegionStats::moveCalls>();
        return uffd_.move(io_.addr(run.pages[0]) + done, images + done, len - done, got);
    case Via::Client: {
        c_.add<&RegionStats::copyCalls>();
        bool slow = false;
        const long rc = client_->copy(clientBase_ + io_.bytes(run.pages[0]) + done, len - done, got, &slow);
        if (slow)
            c_.add<&RegionStats::clientSlow>();
        return rc;
    }
    case Via::Copy:
    case Via::Remote: // installRun() made it a copy
        break;
    }
    c_.add<&RegionStats::copyCalls>();
    return uffd_.copy(io_.addr(run.pages[0]) + done, images + done, len - done, got);
}

void CopyInstaller::askRemote(const InstallBatch& run) noexcept
{
    c_.add<&RegionStats::copyCalls>();
    bool slow = false;
    const long rc = remote_->copy(io_.bytes(run.pages[0]), io_.bytes(run.size()), &slow);
    if (slow)
        c_.add<&RegionStats::clientSlow>();
    if (rc >= 0) {
        claimed_ = static_cast<size_t>(rc) >> io_.pageShift(); // the rest, if any, put() copies in
        return;
    }
    // None is the client's. EEXIST (a page was there), EAGAIN (its mappings
    // were changing) and ENOMEM (its hugetlb limit, or the pool) are for this
    // time only.
    if (rc == -ETIMEDOUT) {
        c_.add<&RegionStats::clientLate>();
        protectLate(run, 0);
    } else if (rc == -ENOMEM) {
        NPF_WARN_RL("region %s: the client could not allocate %zu huge pages at page %llu (its pod's hugepages-2Mi "
                    "limit, or the pool): npfd installed them, charged to npfd",
                    name_.c_str(), run.size(), static_cast<unsigned long long>(run.pages[0]));
    } else if (rc != -EEXIST && rc != -EAGAIN && rc != -EINTR) {
        remote_->disable();
        NPF_WARN("region %s: the client's installs failed at page %llu: %s; its pages are installed through npfd's "
                 "mapping from now on (charged to npfd)",
                 name_.c_str(), static_cast<unsigned long long>(run.pages[0]), std::strerror(static_cast<int>(-rc)));
    }
}

void CopyInstaller::clientRefused(const InstallBatch& run, size_t k, long rc) noexcept
{
    if (rc == -ETIMEDOUT || rc == -ECANCELED) {
        c_.add<&RegionStats::clientLate>();
        if (rc == -ETIMEDOUT) // cancelled: its thread never started it, nothing to wait for
            protectLate(run, k);
        return;
    }
    // EAGAIN: the client's mappings are changing; EBUSY: the installer was
    // not idle, or cooling down after this run's slow first job. Ours this
    // time.
    if (rc == -EAGAIN || rc == -EBUSY)
        return;
    // Its mapping is not where it said, not registered, or it is gone: we
    // install through our own mapping from now on (the client, if still
    // there, is found out by the region's probes).
    client_->disable();
    NPF_WARN("region %s: UFFDIO_COPY into the client's mapping at page %llu: %s; its pages are installed through "
             "npfd's mapping from now on (charged to npfd)",
             name_.c_str(), static_cast<unsigned long long>(run.pages[k]), std::strerror(static_cast<int>(-rc)));
}

void CopyInstaller::protectLate(const InstallBatch& run, size_t k) noexcept
{
    lateOffset_ = io_.bytes(run.pages[k]);
    lateLen_ = io_.bytes(run.size() - k);
    state_.protectAlways(lateOffset_, lateLen_);
}

// Keeps what is there and patches our pieces in.
int CopyInstaller::onExisting(const InstallBatch& run, size_t k) noexcept
{
    const uint64_t page = run.pages[k];
    // A page the client's thread says it installed holds our images,
    // payloads and all; nothing vouches for any other.
    const int rc = k < claimed_ ? 0 : io_.patch(plan_, page, run.piecesBegin(k), run.piecesEnd(k));
    // Not there for our write after all (a client's page, punched since):
    // not installed; its datagrams fail, the next ones install it afresh.
    if (rc == -EFAULT)
        return rc;
    // Asked of the client (claimed or not: a late job's copy into the
    // client's mapping may land after the deadline, a client's thread may
    // say less than it did), it went in through the client's userfaultfd
    // and its pod paid: the client's install. Else it was populated behind
    // our back.
    if (askedClient_) {
        c_.add<&RegionStats::pagesInstalled>();
        c_.add<&RegionStats::clientInstalls>();
    } else {
        c_.add<&RegionStats::eexist>();
    }
    // A 2 MiB page the client's thread installed is in the page cache and
    // its mapping, not ours: mapped now, or the workers' first store to it
    // would fault (Region::fastStore).
    if (askedClient_ && io_.pageShift() != NPF_PAGE_SHIFT)
        (void)uffd_.continueRange(io_.addr(page), io_.bytes(1), nullptr);
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
