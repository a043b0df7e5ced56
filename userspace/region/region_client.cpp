// The client side of a region built from ClientMemory (npfd): adopting the
// client's memfd and userfaultfd, serving the client's faults, fencing its
// mapping during eviction. (Pages are read and written through the memfd
// then: PageIo.)
//
// A page goes into the shmem page cache with its content (restored content
// if it was saved, else zeros, then payloads) by one UFFDIO_COPY: into the
// client's mapping through the client's uffd where its ClientInstaller keeps
// up (the client's memory cgroup pays, and the client finds the page mapped;
// npfd's own mapping then maps it on first touch, a minor fault), else into
// our own mapping through our uffd (npfd pays). A client fault is served the
// same way; then UFFDIO_WAKE on the client's uffd lets the client retry.
// Either way there is one install path with one set of bookkeeping.
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "region/nothrow_alloc.h"
#include "region/region.h"
#include "sys/error.h"
#include "sys/log.h"
#include "sys/reopen.h"

namespace npf {
void Region::adoptMemfd(Fd memfd)
{
    const std::string what = "the client's memfd for region " + cfg_.name;
    if (!memfd)
        throwErrno(EBADF, what);
    struct statfs fs{};
    if (::fstatfs(memfd.get(), &fs) != 0)
        throwErrno("fstatfs " + what);
    const bool huge = geo_.pageShift != NPF_PAGE_SHIFT;
    if (!huge && fs.f_type != TMPFS_MAGIC)
        throwErrno(EINVAL, what + " is not a shmem memfd (memfd_create without MFD_HUGETLB) as 4 KiB pages need");
    if (huge && (fs.f_type != HUGETLBFS_MAGIC || static_cast<uint64_t>(fs.f_bsize) != kHugePageSize))
        throwErrno(EINVAL, what + " is not a hugetlbfs memfd of 2 MiB pages (MFD_HUGETLB | MFD_HUGE_2MB) as "
                                  "2 MiB pages need");
    // Our own open file description: the client keeps its copy and may set
    // O_APPEND on it (our pwrite()s would append, growing the file without
    // bound and writing payloads past the region) or any other status flag.
    // Sealed against shrinking (eviction punches holes: never against writes).
    memfd = adoptPeerMemfd(memfd.get(), geo_.size, what);
    memfd_ = std::move(memfd);
    adopted_ = true;
}

void Region::adoptClientUffd(Fd uffd, uint64_t base)
{
    const std::string who = "the client of region " + cfg_.name;
    if (base % bytes(1) || base + geo_.size < base) {
        char hex[32];
        std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(base));
        throwErrno(EINVAL, who + ": base " + hex + " is not the page-aligned start of " + std::to_string(geo_.size) +
                               " bytes");
    }
    clientUffd_ = Userfaultfd::adopt(std::move(uffd), who);
    clientBase_ = base;
    if (!wp_)
        return; // no fence for our own mapping: none for the client's either
    // Probe: un-protect the client's range without waking (nothing is
    // fenced yet). 0: its mapping is registered for WP, the fence covers it;
    // ENOENT: not registered for WP (or not at all) there.
    int rc = 0;
    for (int again = 0; again < 100; ++again) {
        rc = clientUffd_.writeProtect(clientAddr(0), geo_.size, false, false);
        if (rc != -EAGAIN)
            break;
        serviceClientFaultsLocked(nullptr); // reads the event that holds the client's mappings
    }
    if (rc == 0) {
        clientWp_ = true;
    } else if (rc == -ENOENT) {
        NPF_WARN("region %s: the client's mapping is not registered for write-protect: its own writes racing an "
                 "eviction can be lost",
                 cfg_.name.c_str());
    } else {
        throwErrno(-rc, "write-protect probe through the userfaultfd of " + who +
                            (rc == -ESRCH ? " (the client has exited)" : " over its region"));
    }
}

void Region::clientFailed(int err, const char* what) noexcept
{
    if (clientGone_.exchange(true, std::memory_order_acq_rel))
        return;
    c_->add<&RegionStats::clientGone>();
    NPF_INFO("region %s: %s through the client's userfaultfd: %s; the client is gone, its faults are no longer "
             "served",
             cfg_.name.c_str(), what, std::strerror(-err));
}

bool Region::checkClient() noexcept
{
    std::lock_guard lk(mu_);
    if (!clientUffd_ || clientGone())
        return false;
    // Un-protecting one page without waking changes nothing outside an
    // eviction (we hold the lock); the kernel checks the client's mm first.
    int rc = clientUffd_.writeProtect(clientAddr(0), bytes(1), false, false);
    if (rc == 0 || rc == -ENOENT || rc == -EAGAIN)
        return true;
    clientFailed(rc, "probe");
    return false;
}

void Region::wakeClient(uint64_t page, uint64_t n) noexcept
{
    if (int rc = clientUffd_.wake(clientAddr(page), bytes(n)))
        clientFailed(rc, "UFFDIO_WAKE");
}

int Region::serviceClientFaults(BatchTiming* t) noexcept
{
    std::lock_guard lk(mu_);
    if (t)
        *t = BatchTiming{monotonicNs()};
    int rc = serviceClientFaultsLocked(t);
    if (t)
        t->end = monotonicNs();
    autoEvictLocked();
    return rc;
}

int Region::serviceClientFaultsLocked(BatchTiming* t) noexcept
{
    if (!clientUffd_ || clientGone())
        return -ENOTCONN;
    int served = 0;
    for (int round = 0; round < 16; ++round) {
        int n = clientUffd_.readEvents(msgs_.data(), static_cast<int>(msgs_.size()));
        if (n < 0) {
            clientFailed(n, "read events");
            return served ? served : -ENOTCONN;
        }
        if (n == 0)
            break;
        scratchPages_.clear();
        for (int m = 0; m < n; ++m) {
            const uffd_msg& msg = msgs_[m];
            if (msg.event != UFFD_EVENT_PAGEFAULT) {
                // Non-cooperative events the client asked for concern us not;
                // reading them is all they need. A fork event's new uffd was
                // installed into our fd table by the read: close it.
                if (msg.event == UFFD_EVENT_FORK)
                    ::close(static_cast<int>(msg.arg.fork.ufd));
                c_->add<&RegionStats::clientIgnored>();
                continue;
            }
            uint64_t a = msg.arg.pagefault.address;
            if (a < clientBase_ || a - clientBase_ >= geo_.size) {
                c_->add<&RegionStats::clientIgnored>();
                NPF_WARN_RL("region %s: client fault at 0x%llx outside its region: ignored", cfg_.name.c_str(),
                            static_cast<unsigned long long>(a));
                continue;
            }
            uint64_t page = (a - clientBase_) >> geo_.pageShift;
            ++served;
            c_->add<&RegionStats::clientFaults>();
            // WP: left over from an eviction whose fence is lifted (the lift
            // woke it already). Present: installed since the client faulted
            // (our install wakes only our own waiters), or punched by it.
            bool wpFault = msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP;
            if (wpFault || state_.present(page)) {
                if (!wpFault)
                    refill(page);
                wakeClient(page, 1);
                continue;
            }
            if (!pushBack(scratchPages_, page)) {
                c_->add<&RegionStats::errors>();
                wakeClient(page, 1); // faults again later
            }
        }
        installFaulted(t);
        // Woken whether installed or not: a failed install faults again, a
        // client never waits for an event we already read.
        for (size_t k = 0; k < scratchPages_.size();) {
            size_t m = k + 1;
            while (m < scratchPages_.size() && scratchPages_[m] == scratchPages_[m - 1] + 1)
                ++m;
            wakeClient(scratchPages_[k], m - k);
            k = m;
        }
        if (clientGone())
            return served;
        if (n < static_cast<int>(msgs_.size()))
            break;
    }
    return served;
}

int Region::fenceClient(uint64_t page, uint64_t n, bool wp) noexcept
{
    if (!clientWp_ || clientGone())
        return 0;
    for (int again = 0;; ++again) {
        int rc = clientUffd_.writeProtect(clientAddr(page), bytes(n), wp);
        if (rc == 0)
            return 0;
        if (rc == -EAGAIN && again < 100) {
            // The client's mappings are changing: a non-cooperative event
            // waits to be read.
            serviceClientFaultsLocked(nullptr);
            continue;
        }
        if (rc == -EAGAIN)
            return rc; // the victims stay resident, eviction tries again later
        // Gone (exited: ESRCH), or its mapping is not where it said: either
        // way it writes no page of ours through a registered mapping now.
        clientFailed(rc, wp ? "write-protect" : "lift write-protect");
        return 0;
    }
}

} // namespace npf
