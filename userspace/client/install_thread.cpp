#include "client/install_thread.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "sys/clock.h"
#include "sys/error.h"
#include "sys/futex.h"

namespace npf {

InstallThread::InstallThread(uint8_t* region, uint64_t regionSize, uint64_t pageSize, uint32_t images,
                             const Userfaultfd& uffd, int sock, std::function<void()> lost)
    : region_(region), regionSize_(regionSize), pageSize_(pageSize), images_(images), sock_(sock),
      lost_(std::move(lost))
{
    const uint64_t size = NPF_INSTALL_IMAGES + images * pageSize;
    area_.reset(::memfd_create("npf-client-install", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!area_)
        throwErrno("memfd_create for the npf region's install area");
    checkErrno(::ftruncate(area_.get(), static_cast<off_t>(size)), "size the npf install area");
    // Allocated here: this process pays for it, not npfd, who writes it.
    if (int err = ::posix_fallocate(area_.get(), 0, static_cast<off_t>(size)))
        throwErrno(err, "allocate the npf install area (" + std::to_string(size >> 20) + " MiB)");
    map_ = MmapArea::map(size, PROT_READ | PROT_WRITE, MAP_SHARED, area_.get(), 0, "the npf install area");
    uffd_ = uffd.duplicate("the npf region");
    thread_ = std::thread([this] { run(); });
    ::pthread_setname_np(thread_.native_handle(), "npf-install");
}

InstallThread::~InstallThread()
{
    stop_.store(true, std::memory_order_release);
    futexWake(&ctl()->post); // (one that just missed it sees stop_ within 100 ms)
    thread_.join();
}

void InstallThread::run() noexcept
{
    npf_install_ctl* c = ctl();
    uint32_t last = 0; // the area is fresh: a job npfd posted before we got here is job 1
    while (!stop_.load(std::memory_order_acquire)) {
        const uint32_t job = std::atomic_ref<__u32>(c->post).load(std::memory_order_acquire);
        if (job == last) {
            // Woken by a job, by the destructor, or every 100 ms to see
            // whether npfd hung up.
            if (futexWaitUntil(&c->post, last, monotonicNs() + 100'000'000) != -ETIMEDOUT)
                continue;
            pollfd p{sock_, 0, 0};
            if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR))) {
                uffd_ = Userfaultfd(); // the region's registration goes with npfd's copy
                lost_();
                return;
            }
            continue;
        }
        last = job;
        const uint64_t offset = std::atomic_ref<__u64>(c->offset).load(std::memory_order_relaxed);
        const uint64_t len = std::atomic_ref<__u64>(c->len).load(std::memory_order_relaxed);
        std::atomic_ref<__s64>(c->result).store(static_cast<__s64>(install(offset, len)), std::memory_order_relaxed);
        std::atomic_ref<__u32>(c->done).store(job, std::memory_order_release);
        futexWake(&c->done);
    }
}

int64_t InstallThread::install(uint64_t offset, uint64_t len) noexcept
{
    if (!len || len % pageSize_ || offset % pageSize_ || len > images_ * pageSize_ || offset > regionSize_ ||
        len > regionSize_ - offset)
        return -EINVAL; // npfd posts none such
    const uint8_t* images = map_.as<uint8_t>() + NPF_INSTALL_IMAGES;
    uint64_t done = 0;
    for (int again = 0; done < len;) {
        int64_t copied = 0;
        const long rc = uffd_.copy(region_ + offset + done, images + done, len - done, &copied);
        if (rc >= 0)
            return static_cast<int64_t>(len);
        done += copied > 0 ? static_cast<uint64_t>(copied) : 0;
        if (rc != -EAGAIN || ++again == 3) // EAGAIN: the mappings were changing
            return done ? static_cast<int64_t>(done) : rc;
    }
    return static_cast<int64_t>(done);
}

} // namespace npf
