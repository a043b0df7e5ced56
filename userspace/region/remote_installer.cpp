#include "region/remote_installer.h"

#include <linux/magic.h>
#include <sys/statfs.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "sys/clock.h"
#include "sys/error.h"
#include "sys/futex.h"
#include "sys/reopen.h"

namespace npf {

RemoteInstaller::RemoteInstaller(Fd area, uint64_t pageSize, uint32_t maxImages, std::chrono::microseconds deadline,
                                 CoolDown coolDown, const std::string& who)
    : pageSize_(pageSize), deadline_(deadline), coolDown_(coolDown)
{
    const std::string what = "the install area of " + who;
    struct statfs fs{};
    if (!area || ::fstatfs(area.get(), &fs) != 0)
        throwErrno(EBADF, what);
    if (fs.f_type != TMPFS_MAGIC)
        throwErrno(EINVAL, what + " is not a shmem memfd (memfd_create without MFD_HUGETLB)");
    uint64_t size = 0;
    fd_ = adoptPeerMemfd(area.get(), NPF_INSTALL_IMAGES + pageSize, what, &size);
    const uint64_t room = (size - NPF_INSTALL_IMAGES) / pageSize;
    images_ = static_cast<uint32_t>(std::min<uint64_t>(room, maxImages));
    area_ = MmapArea::map(NPF_INSTALL_IMAGES + images_ * pageSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0,
                          what);
    job_ = std::atomic_ref<__u32>(ctl()->post).load(std::memory_order_relaxed);
}

bool RemoteInstaller::ended(uint32_t job) const noexcept
{
    return std::atomic_ref<__u32>(ctl()->done).load(std::memory_order_acquire) == job;
}

bool RemoteInstaller::ready() const noexcept
{
    return !disabled_ && !late_ && coolDown_.over(monotonicNs());
}

long RemoteInstaller::copy(uint64_t offset, uint64_t len, bool* slow) noexcept
{
    *slow = false;
    if (!ready() || len > images_ * pageSize_ || len % pageSize_)
        return -EBUSY;
    npf_install_ctl* c = ctl();
    std::atomic_ref<__u64>(c->offset).store(offset, std::memory_order_relaxed);
    std::atomic_ref<__u64>(c->len).store(len, std::memory_order_relaxed);
    // UFFDIO_COPY of a 2 MiB page takes a few hundred microseconds: the
    // deadline is per page.
    const uint64_t wait = static_cast<uint64_t>(std::chrono::nanoseconds(deadline_).count()) * (len / pageSize_);
    const uint64_t posted = monotonicNs();
    std::atomic_ref<__u32>(c->post).store(++job_, std::memory_order_release);
    futexWake(&c->post);
    for (;;) {
        const uint32_t seen = std::atomic_ref<__u32>(c->done).load(std::memory_order_acquire);
        if (seen == job_)
            break;
        // Whatever the client writes to done only wakes us early.
        if (futexWaitUntil(&c->done, seen, posted + wait) == -ETIMEDOUT && !ended(job_)) {
            late_ = true;
            coolDown_.missed(wait, monotonicNs());
            return -ETIMEDOUT;
        }
    }
    const uint64_t now = monotonicNs();
    *slow = coolDown_.ended(now - posted, wait, now);
    const int64_t result = std::atomic_ref<__s64>(c->result).load(std::memory_order_relaxed);
    if (result < 0)
        return result < -4095 ? -EIO : static_cast<long>(result);
    const uint64_t got = static_cast<uint64_t>(result) < len ? static_cast<uint64_t>(result) : len;
    return static_cast<long>(got - got % pageSize_);
}

bool RemoteInstaller::settled() noexcept
{
    if (!late_ || !ended(job_))
        return false;
    late_ = false;
    return true;
}

} // namespace npf
