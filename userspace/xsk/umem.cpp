#include "xsk/umem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>

#include "sys/error.h"
#include "xsk/sizing.h"
#include "sys/log.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

namespace npf::xsk {

xdp_mmap_offsets ringOffsets(int fd, const std::string& what)
{
    xdp_mmap_offsets off{};
    socklen_t len = sizeof(off);
    checkErrno(::getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len), what + ": XDP_MMAP_OFFSETS");
    return off;
}

MmapArea mapRing(int fd, const xdp_ring_offset& off, off_t pgoff, uint32_t entries, size_t descSize,
                 RingPtrs* out, const std::string& what)
{
    MmapArea m = MmapArea::map(off.desc + entries * descSize, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_POPULATE, fd, pgoff, what);
    auto* b = m.as<uint8_t>();
    *out = RingPtrs{reinterpret_cast<uint32_t*>(b + off.producer), reinterpret_cast<uint32_t*>(b + off.consumer),
                    reinterpret_cast<uint32_t*>(b + off.flags), b + off.desc, entries};
    return m;
}

namespace {

void checkConfig(UmemConfig& c, const std::string& name)
{
    auto bad = [&](const std::string& why) { throwErrno(EINVAL, "UMEM of " + name + ": " + why); };
    if (!std::has_single_bit(c.frameSize) || c.frameSize < 2048 || c.frameSize > 4096)
        bad("frame size " + std::to_string(c.frameSize) + " must be 2048 or 4096 (aligned chunks)");
    if (c.frameCount == 0 || c.frameCount > (1u << 20))
        bad("frame count " + std::to_string(c.frameCount) + " must be 1 .. 1048576");
    if (c.fillSize == 0)
        c.fillSize = defaultFillSize(c.frameCount);
    if (!std::has_single_bit(c.fillSize) || c.fillSize < 2 * c.frameCount)
        bad("fill ring size " + std::to_string(c.fillSize) + " must be a power of two >= 2 * frame count (" +
            std::to_string(2 * c.frameCount) + ")");
    if (!std::has_single_bit(c.compSize))
        bad("completion ring size " + std::to_string(c.compSize) + " must be a power of two");
    if (c.headroom > c.frameSize / 2)
        bad("headroom " + std::to_string(c.headroom) + " leaves no room in a " + std::to_string(c.frameSize) +
            "-byte frame");
}

void registerUmem(int ownerFd, void* frames, const UmemConfig& cfg, const std::string& what)
{
    const size_t bytes = size_t(cfg.frameSize) * cfg.frameCount;
    xdp_umem_reg reg{};
    reg.addr = reinterpret_cast<uintptr_t>(frames);
    reg.len = bytes;
    reg.chunk_size = cfg.frameSize;
    reg.headroom = cfg.headroom;
    checkErrno(::setsockopt(ownerFd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)),
               "register " + what + " (XDP_UMEM_REG pins its " + std::to_string(bytes) +
                   " bytes: needs CAP_IPC_LOCK, or an RLIMIT_MEMLOCK that holds them)");
    checkErrno(::setsockopt(ownerFd, SOL_XDP, XDP_UMEM_FILL_RING, &cfg.fillSize, sizeof(cfg.fillSize)),
               what + ": fill ring of " + std::to_string(cfg.fillSize));
    checkErrno(::setsockopt(ownerFd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &cfg.compSize, sizeof(cfg.compSize)),
               what + ": completion ring of " + std::to_string(cfg.compSize));
}

} // namespace

Umem::Umem(int ownerFd, const UmemConfig& cfg, const std::string& name) : cfg_(cfg)
{
    checkConfig(cfg_, name);
    const std::string what = "UMEM of " + name;
    const size_t bytes = size_t(cfg_.frameSize) * cfg_.frameCount;
    frames_ = MmapArea::map(bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0,
                            what + " (" + std::to_string(bytes) + " bytes)");
    registerUmem(ownerFd, frames_.get(), cfg_, what);
    mapRingsAndFill(ownerFd, what);
}

Umem::Umem(Adopt, int ownerFd, int memfd, const UmemConfig& cfg, const std::string& name) : cfg_(cfg)
{
    checkConfig(cfg_, name);
    const std::string what = "UMEM of " + name + " (handed over)";
    const size_t bytes = size_t(cfg_.frameSize) * cfg_.frameCount;
    struct stat st{};
    checkErrno(::fstat(memfd, &st), what + ": fstat");
    if (static_cast<uint64_t>(st.st_size) != bytes)
        throwErrno(EINVAL, what + ": its memfd holds " + std::to_string(st.st_size) + " bytes, not the " +
                               std::to_string(bytes) + " of " + std::to_string(cfg_.frameCount) + " frames of " +
                               std::to_string(cfg_.frameSize));
    frames_ = MmapArea::map(bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, memfd, 0,
                            what + " (" + std::to_string(bytes) + " bytes, read-only)");
    mapRingsAndFill(ownerFd, what);
}

void Umem::mapRingsAndFill(int ownerFd, const std::string& what)
{
    xdp_mmap_offsets off = ringOffsets(ownerFd, what);
    RingPtrs p;
    fillMap_ = mapRing(ownerFd, off.fr, XDP_UMEM_PGOFF_FILL_RING, cfg_.fillSize, sizeof(uint64_t), &p,
                       what + ": fill ring");
    fill_ = ProdRing(p);
    compMap_ = mapRing(ownerFd, off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, cfg_.compSize, sizeof(uint64_t), &p,
                       what + ": completion ring");
    stash_ = std::make_unique<uint64_t[]>(cfg_.frameCount);

    std::lock_guard lk(fillLock_);
    if (fill_.freeSlots(cfg_.frameCount) < cfg_.frameCount)
        throwErrno(EBUSY, what + ": its fill ring holds frames already (another process runs it?)");
    for (uint32_t i = 0; i < cfg_.frameCount; i++)
        fill_.addrAt(i) = uint64_t(i) * cfg_.frameSize;
    fill_.submit(cfg_.frameCount);
    NPF_DEBUG("%s: %u frames of %u bytes (%llu KiB pinned), fill %u, completion %u", what.c_str(), cfg_.frameCount,
              cfg_.frameSize, static_cast<unsigned long long>(bytes() / 1024), cfg_.fillSize, cfg_.compSize);
}

Fd registerSharedUmem(int ownerFd, UmemConfig& cfg, const std::string& name)
{
    checkConfig(cfg, name);
    const std::string what = "UMEM of " + name + " (to hand over)";
    const size_t bytes = size_t(cfg.frameSize) * cfg.frameCount;
    Fd memfd(::memfd_create("npf-umem", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!memfd)
        throwErrno("memfd_create for " + what);
    checkErrno(::ftruncate(memfd.get(), static_cast<off_t>(bytes)), what + ": size its memfd");
    {
        // Registration pins the pages (they stay in the memfd); no mapping is kept.
        MmapArea frames = MmapArea::map(bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd.get(), 0,
                                        what + " (" + std::to_string(bytes) + " bytes)");
        registerUmem(ownerFd, frames.get(), cfg, what);
    }
    checkErrno(::fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL),
               what + ": seal its memfd");
    return memfd;
}

uint32_t Umem::pushLocked(const uint64_t* addrs, uint32_t n) noexcept
{
    uint32_t k = std::min(n, fill_.freeSlots(n));
    for (uint32_t i = 0; i < k; i++)
        fill_.addrAt(i) = frameOf(addrs[i]);
    if (k)
        fill_.submit(k);
    return k;
}

void Umem::recycle(const uint64_t* addrs, uint32_t n) noexcept
{
    if (n == 0)
        return;
    std::lock_guard lk(fillLock_);
    if (fill_.queued() == 0)
        counters_.emptyFound.store(counters_.emptyFound.load(std::memory_order_relaxed) + 1,
                                   std::memory_order_relaxed);
    if (stashed_) {
        uint32_t k = pushLocked(stash_.get(), stashed_);
        std::copy(stash_.get() + k, stash_.get() + stashed_, stash_.get());
        stashed_ -= k;
    }
    uint32_t k = stashed_ ? 0 : pushLocked(addrs, n);
    for (uint32_t i = k; i < n && stashed_ < cfg_.frameCount; i++)
        stash_[stashed_++] = frameOf(addrs[i]);
    if (k < n)
        counters_.stashed.store(counters_.stashed.load(std::memory_order_relaxed) + (n - k),
                                std::memory_order_relaxed);
    counters_.recycled.store(counters_.recycled.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

bool Umem::fillNeedsWakeup() noexcept { return fill_.needsWakeup(); }

} // namespace npf::xsk
