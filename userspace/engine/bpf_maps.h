// The BPF_F_MMAPABLE maps of a running instance, mapped into this process:
// post rings and cursors (written by the application side), resident bitmap
// (written by the pager).
#pragma once

#include <cstdint>

#include "npf/abi.h"
#include "sys/mmap_area.h"

namespace npf::ctl {
class Dataplane;
}

namespace npf {

class MappedMaps {
public:
    explicit MappedMaps(const ctl::Dataplane& dp);

    npf_post* posts(uint32_t flow) const noexcept { return posts_.as<npf_post>() + flow * NPF_POST_RING_SIZE; }
    npf_cursor* cursor(uint32_t flow) const noexcept { return cursors_.as<npf_cursor>() + flow; }
    uint64_t* resident() const noexcept { return resident_.as<uint64_t>(); }

private:
    MmapArea posts_, cursors_, resident_;
};

} // namespace npf
