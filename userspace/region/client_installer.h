// Installs pages into a client's mapping through the client's userfaultfd
// (npfd): UFFDIO_COPY at the client's address. The kernel charges a page a
// UFFDIO_COPY allocates to the memory cgroup of the destination's mm, so the
// client's pod pays for its resident pages, and the client finds them mapped
// (no minor fault of its own).
//
// That ioctl works on the client's mm: it takes the client's VMA lock (or its
// mmap lock, which the client can hold for writing in a long munmap) and
// charges the client's memory cgroup (direct reclaim, memory.high
// throttling: the kernel makes the charging task, here npfd's, sleep for
// it). A client could hold the pager up through it, so it runs on a thread
// of its own per client, and the pager waits for it at most `deadline`.
// Then:
//  - not started (the thread did not get a CPU in time): the job is
//    cancelled (-ECANCELED); the installer is not ready() again until its
//    thread has come round;
//  - started: the job is late (-ETIMEDOUT) and runs on. The pager installs
//    the same pages through its own mapping (npfd pays for them; the late
//    copy then finds them present, EEXIST, and changes nothing) and keeps
//    them from eviction until settled(): a late copy into a hole evicted
//    meanwhile would bring back stale content.
// Either way the pager installs through its own mapping until ready(). A
// job that ends in time but after half the deadline is slow: a client held
// up just short of the deadline on every job would hold the pager nearly as
// long as a late one. Slow, late or cancelled, the installer then takes no
// job for a while (CoolDown), and the pager installs through its own mapping.
// A job's time runs from its post to the end of its ioctl, as the thread
// saw it: how long the pager then took to get a CPU is not the client's doing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "region/cool_down.h"
#include "region/uffd.h"

namespace npf {

class ClientInstaller {
public:
    // A thread that copies up to maxBytes at a time through `client` (a
    // duplicate of its descriptor: the region may close its own first);
    // `coolDown`: when it gets no jobs after slow ones.
    // Throws if the thread or its buffer cannot be had.
    ClientInstaller(const Userfaultfd& client, size_t maxBytes, std::chrono::microseconds deadline,
                    CoolDown coolDown, const std::string& who);
    // Ends the thread: joins it when idle; a late job's thread is left to
    // finish on its own (it owns what it uses).
    ~ClientInstaller();
    ClientInstaller(const ClientInstaller&) = delete;
    ClientInstaller& operator=(const ClientInstaller&) = delete;

    // True when copy() may be called: not disabled, the thread idle (no job
    // late, none cancelled that it has not come round to), and no cool-down
    // after a slow job running. Build the images in buffer() then.
    bool ready() const noexcept;
    // maxBytes of page images: the next job's source.
    uint8_t* buffer() const noexcept;
    // UFFDIO_COPY of len bytes from buffer() to the client's `dst`, on the
    // installer's thread. Returns what Userfaultfd::copy returns (len or
    // -errno, *copied the bytes installed before an error) if it ends within
    // `deadline`, *slow set if after half of it; else -ECANCELED when the
    // thread had not started it (nothing was copied), -ETIMEDOUT when it
    // had: the job is late, buffer() stays its until settled(). Call only
    // when ready() (else -EBUSY).
    long copy(uint64_t dst, size_t len, int64_t* copied, bool* slow) noexcept;
    // True once, when a late job has ended: its pages may be evicted again.
    bool settled() noexcept;
    // No more jobs (the client's descriptor refused one for good).
    void disable() noexcept;

private:
    struct Shared;
    static void run(std::shared_ptr<Shared> s) noexcept;

    std::shared_ptr<Shared> s_;
    std::thread thread_;
    CoolDown coolDown_; // the pager's, like ready() and copy()
};

} // namespace npf
