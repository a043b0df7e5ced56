// The client's half of npfd's RemoteInstaller: a thread of this process that
// installs the huge pages of its 2 MiB region, so that they are allocated,
// and charged to this process's hugetlb cgroup (its pod's hugepages-2Mi),
// by a task of its own. npfd writes page images into the install area (a
// shmem memfd this process creates and allocates: npf_install_ctl, then the
// images) and posts a job; the thread copies them into the region with
// UFFDIO_COPY through a duplicate of the region's userfaultfd and says how
// far it got.
//
// While it runs this process holds a copy of the userfaultfd, which keeps
// the region registered: when npfd hangs up (the socket reports it), the
// thread closes it first (a thread touching a page npfd had evicted then
// gets a fresh page instead of waiting forever), then calls `lost`.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "npf/abi.h"
#include "region/uffd.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"

namespace npf {

class InstallThread {
public:
    // An install area with room for `images` pages of pageSize, allocated
    // now, and the thread: installs into [region, region + regionSize)
    // through a duplicate of `uffd`; watches `sock` for npfd's hang-up.
    // Throws naming what failed.
    InstallThread(uint8_t* region, uint64_t regionSize, uint64_t pageSize, uint32_t images, const Userfaultfd& uffd,
                  int sock, std::function<void()> lost);
    ~InstallThread(); // stops and joins the thread (it ends any job first)
    InstallThread(const InstallThread&) = delete;
    InstallThread& operator=(const InstallThread&) = delete;

    // The install area's memfd, for the region request.
    int areaFd() const noexcept { return area_.get(); }

private:
    void run() noexcept;
    // One job: bytes installed or -errno, for npf_install_ctl.result.
    int64_t install(uint64_t offset, uint64_t len) noexcept;
    npf_install_ctl* ctl() const noexcept { return map_.as<npf_install_ctl>(); }

    uint8_t* region_;
    uint64_t regionSize_, pageSize_;
    uint32_t images_;
    Fd area_;
    MmapArea map_;
    Userfaultfd uffd_;
    int sock_;
    std::function<void()> lost_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

} // namespace npf
