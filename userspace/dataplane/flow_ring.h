// The per-flow and per-region BPF maps that npf_rings and npf_regions hold:
//   FlowRing      a flow's post ring (struct npf_ring, the one value of its
//                 own mmapable array), mapped into this process;
//   ResidentMap   a region's resident bitmap (u64 words, mmapable), mapped.
// Each is an fd plus a mapping; the fd can be passed to another process
// (npfd hands a client its flows' rings and nothing else).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "npf/abi.h"
#include "sys/fd.h"
#include "sys/mmap_area.h"

namespace npf::dataplane {

class Dataplane;

class FlowRing {
public:
    // A new ring map whose cursor is {gen, flags}, everything else zero.
    static FlowRing create(uint32_t gen, uint32_t flags);
    // npf_rings[id] of the instance, or nullopt if the slot is empty. Opened
    // through its pin (pins.h, ringPinPath); StateError(ESTALE) if that is
    // missing or not the map in the slot.
    static std::optional<FlowRing> open(const Dataplane& dp, uint32_t id);
    // A ring map fd received from elsewhere (npfd): checks that it is one.
    static FlowRing adopt(Fd fd);

    // Pins the map at `path`, replacing what was pinned there.
    void pin(const std::string& path) const;

    int fd() const noexcept { return fd_.get(); }
    npf_ring* ring() const noexcept { return map_.as<npf_ring>(); }
    npf_cursor* cursor() const noexcept { return &ring()->cursor; }
    npf_post* posts() const noexcept { return ring()->posts; }

private:
    FlowRing(Fd fd, const std::string& what);
    Fd fd_;
    MmapArea map_;
};

// The smallest bitmap size class (abi.h) that holds `pages` pages.
uint32_t bitmapClass(uint64_t pages) noexcept;

class ResidentMap {
public:
    // A zeroed bitmap for a region of `pages` pages (1 .. NPF_MAX_REGION_PAGES),
    // of its size class: the words past the region stay zero.
    static ResidentMap create(uint64_t pages);
    // The bitmap another process made for a region of `pages` pages (npfd,
    // for a client in delegated mode), mapped read-write: no privilege needed.
    static ResidentMap adopt(Fd fd, uint64_t pages);

    int fd() const noexcept { return fd_.get(); }
    uint64_t* words() const noexcept { return map_.as<uint64_t>(); }
    uint64_t wordCount() const noexcept { return words_; }
    uint32_t sizeClass() const noexcept { return class_; }

private:
    ResidentMap() = default;
    static ResidentMap sized(uint64_t pages); // class and words of `pages`; throws EINVAL out of range
    Fd fd_;
    MmapArea map_;
    uint64_t words_ = 0;
    uint32_t class_ = 0;
};

// The region a flow receives into, as XDP sees it: its resident bitmap (in
// npf_regions_<class>) and its size in bytes (the bound of every posted
// buffer; XDP derives the class from it).
struct RegionBinding {
    int bitmapFd = -1;
    uint64_t size = 0;
};

// Distinct regions bound to the instance's flows.
uint32_t boundRegions(const Dataplane& dp);

} // namespace npf::dataplane
