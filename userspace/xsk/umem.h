// RAII UMEM: the frames area (the only pinned memory of npf) registered on
// the queue's owner socket, with its fill and completion rings.
//
// Frame ownership: every frame is in exactly one place: on the fill ring /
// in the kernel, in an RX ring, in a batch a worker is processing, or held
// by the pager (backup frames it has not released yet). Frames come back
// through recycle(), called by the primary worker after each batch and by
// the pager whenever it releases backup frames.
//
// Two threads feed the one single-producer fill ring. They share it under a
// mutex: the critical section is a handful of slot stores plus one
// store-release, taken once per batch (not per frame), so the uncontended
// cost is two atomic RMWs per batch. The alternative, an SPSC hand-back
// queue that only the worker drains, would leave backup frames stranded
// while the worker sleeps in poll() -- exactly when the primary ring is idle
// because everything goes to the backup ring (cold start) -- and then the
// fill ring starves. A mutex rather than a spinlock because on a 2-vCPU box
// the other holder may be preempted. The mutex's acquire/release orders the
// two producers' slot writes and cached indexes; the producer index store-
// release publishes the slots to the kernel (ring.h).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "sys/fd.h"
#include "sys/mmap_area.h"
#include "xsk/config.h"
#include "xsk/ring.h"

namespace npf::xsk {

// Fill ring events (written under the fill lock, read by anyone).
struct FillCounters {
    std::atomic<uint64_t> recycled{0};  // frames given back to the fill ring
    std::atomic<uint64_t> emptyFound{0}; // recycle found the kernel had drained the ring (starvation risk)
    std::atomic<uint64_t> stashed{0};    // frames that found the ring full and waited in the stash
};

// Tag of the constructor that adopts a UMEM another process registered.
struct Adopt {};

class Umem {
public:
    // Registers the UMEM on the AF_XDP socket `ownerFd` (not owned; it must
    // be bound afterwards as the queue's first socket), creates and maps the
    // fill and completion rings and puts every frame on the fill ring.
    // `name` identifies the queue in error messages.
    Umem(int ownerFd, const UmemConfig& cfg, const std::string& name);
    // A UMEM another process registered on `ownerFd` (bound since) over the
    // pages of `memfd` (npfd's delegated mode, registerSharedUmem): maps the
    // frames read-only (the memfd is sealed against writes) and the fill and
    // completion rings, and puts every frame on the fill ring. Throws if
    // the memfd does not hold cfg's frames.
    Umem(Adopt, int ownerFd, int memfd, const UmemConfig& cfg, const std::string& name);
    Umem(const Umem&) = delete;
    Umem& operator=(const Umem&) = delete;

    // Gives n frames back to the fill ring (any address inside a frame).
    // Thread-safe; never fails (frames that do not fit wait in a stash and go
    // first next time, which cannot happen with fillSize >= 2 * frameCount).
    void recycle(const uint64_t* addrs, uint32_t n) noexcept;
    // True if the kernel asked to be woken up to consume the fill ring.
    bool fillNeedsWakeup() noexcept;

    uint8_t* base() const noexcept { return frames_.as<uint8_t>(); }
    uint64_t bytes() const noexcept { return frames_.size(); }
    uint32_t frameSize() const noexcept { return cfg_.frameSize; }
    uint32_t frameCount() const noexcept { return cfg_.frameCount; }
    uint64_t frameOf(uint64_t addr) const noexcept { return addr & ~uint64_t(cfg_.frameSize - 1); }
    const UmemConfig& config() const noexcept { return cfg_; }
    const FillCounters& counters() const noexcept { return counters_; }

private:
    // The rings of `ownerFd`, mapped; every frame on the fill ring.
    void mapRingsAndFill(int ownerFd, const std::string& what);
    uint32_t pushLocked(const uint64_t* addrs, uint32_t n) noexcept;

    UmemConfig cfg_;
    MmapArea frames_; // unmapped last: the rings and sockets go first
    MmapArea fillMap_;
    MmapArea compMap_; // mapped so the ring exists; never read (RX only)
    std::mutex fillLock_;
    ProdRing fill_;                     // guarded by fillLock_
    std::unique_ptr<uint64_t[]> stash_; // guarded by fillLock_, frameCount entries
    uint32_t stashed_ = 0;              // guarded by fillLock_
    FillCounters counters_;
};

// For a UMEM another process runs (npfd's delegated mode): registers one of
// cfg's geometry on `ownerFd` over the pages of a new memfd, with its fill
// and completion rings, and returns the memfd sealed against writes,
// shrinking and growing (F_SEAL_FUTURE_WRITE: whoever it is handed to can map
// it read-only, never write or punch the pinned pages). The pages are pinned
// and charged to the caller (CAP_IPC_LOCK, or RLIMIT_MEMLOCK). The caller
// keeps no mapping; the UMEM lives as long as the socket.
Fd registerSharedUmem(int ownerFd, UmemConfig& cfg, const std::string& name);

// Maps one ring of an AF_XDP socket: `off` from XDP_MMAP_OFFSETS, `pgoff` the
// XDP_PGOFF_* / XDP_UMEM_PGOFF_* of the ring, `descSize` the slot size.
MmapArea mapRing(int fd, const xdp_ring_offset& off, off_t pgoff, uint32_t entries, size_t descSize,
                 RingPtrs* out, const std::string& what);
// XDP_MMAP_OFFSETS of an AF_XDP socket.
xdp_mmap_offsets ringOffsets(int fd, const std::string& what);

} // namespace npf::xsk
