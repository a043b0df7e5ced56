#include "engine/bpf_maps.h"

#include <sys/mman.h>
#include <unistd.h>

#include "ctl/dataplane.h"

namespace npf {
namespace {

MmapArea mapArray(int fd, uint64_t bytes, const char* name)
{
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    return MmapArea::map((bytes + page - 1) / page * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, name);
}

} // namespace

MappedMaps::MappedMaps(const ctl::Dataplane& dp)
    : posts_(mapArray(dp.posts(), uint64_t(NPF_MAX_FLOWS) * NPF_POST_RING_SIZE * sizeof(npf_post), "npf_posts")),
      cursors_(mapArray(dp.cursors(), NPF_MAX_FLOWS * sizeof(npf_cursor), "npf_cursors")),
      resident_(mapArray(dp.resident(), dp.regionPages() / 64 * sizeof(uint64_t), "npf_resident"))
{
}

} // namespace npf
