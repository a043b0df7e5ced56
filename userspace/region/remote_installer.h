// Installs a client's 2 MiB pages through a thread of the client (npfd):
// a huge page is charged to the hugetlb cgroup of the task that allocates it
// (whichever mapping it enters), so for the client's pod to pay, the client
// must allocate it. The client hands over an install area (npf_install_ctl
// in npf/abi.h, then room for images): we write a run's page images there
// and post the job; libnpf's installer thread copies them into its region
// with UFFDIO_COPY through its own userfaultfd, and says how far it got.
//
// The client may do none of it, or lie: we wait for it at most `deadline`,
// and CopyInstaller then installs through our own mapping whatever is not
// there (npfd pays), checking what the client says it installed (a page it
// did is found present: EEXIST). A job that missed its deadline is late: its
// pages stay protected from eviction until the client says it ended it
// (settled()), as a late copy into a hole evicted meanwhile would bring back
// stale content; no job is posted meanwhile. Nor, for a while, after a job
// that ended in time but after half its deadline, or a late one (CoolDown):
// a client that answers each job just short of the deadline would hold the
// pager nearly as long as one that never answers, job after job.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "npf/abi.h"
#include "region/cool_down.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"

namespace npf {

class RemoteInstaller {
public:
    // Adopts the client's install area `area`: a shmem memfd of
    // NPF_INSTALL_IMAGES + k * pageSize bytes, k >= 1 (images beyond
    // maxImages are not used). `coolDown`: when it gets no jobs after
    // slow or late ones. Throws naming what is wrong with it.
    RemoteInstaller(Fd area, uint64_t pageSize, uint32_t maxImages, std::chrono::microseconds deadline,
                    CoolDown coolDown, const std::string& who);

    // True when copy() may be called: not disabled, no job late, and no
    // cool-down after a slow or late job running.
    bool ready() const noexcept;
    // Room for images(): the next job's source (the client can read and
    // write it: it is the client's memory).
    uint8_t* buffer() const noexcept { return area_.as<uint8_t>() + NPF_INSTALL_IMAGES; }
    uint32_t images() const noexcept { return images_; }
    // Posts the job: install len bytes (whole pages, at most images()) from
    // buffer() at region offset `offset`. Returns, if the client ends it
    // within the deadline (per page), what it says: bytes installed from
    // `offset` on (whole pages, at most len) or -errno, *slow set if it
    // ended after half the deadline; else -ETIMEDOUT: the job is late,
    // buffer() stays its until settled(). Call only when ready() (else -EBUSY).
    long copy(uint64_t offset, uint64_t len, bool* slow) noexcept;
    // True once, when the client has ended a late job.
    bool settled() noexcept;
    // No more jobs (the client's installs failed for good).
    void disable() noexcept { disabled_ = true; }

private:
    npf_install_ctl* ctl() const noexcept { return area_.as<npf_install_ctl>(); }
    bool ended(uint32_t job) const noexcept;

    Fd fd_;
    MmapArea area_;
    uint64_t pageSize_;
    uint32_t images_;
    std::chrono::microseconds deadline_;
    uint32_t job_ = 0;
    bool late_ = false, disabled_ = false;
    CoolDown coolDown_;
};

} // namespace npf
