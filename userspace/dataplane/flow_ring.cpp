#include "dataplane/flow_ring.h"

#include <bpf/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>

#include "dataplane/bpf_info.h"
#include "dataplane/dataplane.h"
#include "dataplane/pins.h"
#include "sys/error.h"

namespace npf::dataplane {
namespace {

size_t pageAlign(uint64_t bytes)
{
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
}

} // namespace

FlowRing::FlowRing(Fd fd, const std::string& what) : fd_(std::move(fd))
{
    // From fdinfo, not bpf(2): a client checks the map npfd handed it with
    // no bpf call, which container seccomp profiles deny without CAP_SYS_ADMIN.
    const bpf_map_info info = mapShape(fd_.get(), what);
    if (info.type != BPF_MAP_TYPE_ARRAY || info.key_size != sizeof(uint32_t) ||
        info.value_size != sizeof(npf_ring) || info.max_entries != 1 || !(info.map_flags & BPF_F_MMAPABLE))
        throw StateError(EPROTO, what + " is not an npf post ring map (ABI version " +
                                     std::to_string(NPF_ABI_VERSION) + ")");
    map_ = MmapArea::map(pageAlign(sizeof(npf_ring)), PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0, what);
}

FlowRing FlowRing::create(uint32_t gen, uint32_t flags)
{
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
    Fd fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "npf_ring", sizeof(uint32_t), sizeof(npf_ring), 1, &opts));
    if (!fd)
        throwErrno("create a post ring map");
    FlowRing r(std::move(fd), "post ring map");
    r.cursor()->gen = gen;
    r.cursor()->flags = flags;
    return r;
}

std::optional<FlowRing> FlowRing::open(const Dataplane& dp, uint32_t id)
{
    const std::string what = "post ring of flow id " + std::to_string(id) + " on " + dp.ifname();
    uint32_t mapId = 0;
    if (bpf_map_lookup_elem(dp.rings(), &id, &mapId) != 0) {
        if (errno == ENOENT)
            return std::nullopt;
        throwErrno("read npf_rings[" + std::to_string(id) + "] of " + dp.ifname());
    }
    // Through its pin: npf_rings hands out the map's id, and opening a map
    // by id needs CAP_SYS_ADMIN.
    const std::string path = ringPinPath(dp.pinDir(), id);
    Fd fd(bpf_obj_get(path.c_str()));
    if (!fd && errno != ENOENT)
        throwErrno("open the " + what + " at " + path);
    if (!fd || mapInfo(fd.get(), path).id != mapId)
        throw StateError(ESTALE, (fd ? path + " is not the map in npf_rings[" + std::to_string(id) + "]"
                                        : "the " + what + " has no pin at " + path) +
                                     " (pins of an older npf?): npfctl detach " + dp.ifname() + "; npfctl attach " +
                                     dp.ifname());
    return FlowRing(std::move(fd), what);
}

void FlowRing::pin(const std::string& path) const
{
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        throwErrno("remove the old pin " + path);
    checkNeg(bpf_obj_pin(fd_.get(), path.c_str()), "pin the post ring map at " + path);
}

FlowRing FlowRing::adopt(Fd fd) { return FlowRing(std::move(fd), "post ring map fd"); }

uint32_t bitmapClass(uint64_t pages) noexcept
{
    uint32_t c = 0;
    while (c < NPF_BITMAP_CLASSES - 1 && pages > NPF_BITMAP_CLASS_PAGES(c))
        c++;
    return c;
}

ResidentMap ResidentMap::sized(uint64_t pages)
{
    if (pages == 0 || pages > NPF_MAX_REGION_PAGES)
        throwErrno(EINVAL, "resident bitmap for " + std::to_string(pages) + " pages (must be 1 .. " +
                               std::to_string(NPF_MAX_REGION_PAGES) + ")");
    ResidentMap m;
    m.class_ = bitmapClass(pages);
    m.words_ = NPF_BITMAP_CLASS_PAGES(m.class_) / 64;
    return m;
}

ResidentMap ResidentMap::create(uint64_t pages)
{
    ResidentMap m = sized(pages);
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
    m.fd_.reset(bpf_map_create(BPF_MAP_TYPE_ARRAY, "npf_bitmap", sizeof(uint32_t), sizeof(uint64_t),
                               static_cast<uint32_t>(m.words_), &opts));
    if (!m.fd_)
        throwErrno("create a resident bitmap map of " + std::to_string(m.words_) + " words");
    m.map_ = MmapArea::map(pageAlign(m.words_ * sizeof(uint64_t)), PROT_READ | PROT_WRITE, MAP_SHARED,
                           m.fd_.get(), 0, "resident bitmap");
    return m;
}

ResidentMap ResidentMap::adopt(Fd fd, uint64_t pages)
{
    ResidentMap m = sized(pages);
    m.fd_ = std::move(fd);
    // A map smaller than the class (not the one npfd bound) fails here.
    m.map_ = MmapArea::map(pageAlign(m.words_ * sizeof(uint64_t)), PROT_READ | PROT_WRITE, MAP_SHARED,
                           m.fd_.get(), 0, "the resident bitmap npfd made");
    return m;
}

uint32_t boundRegions(const Dataplane& dp)
{
    std::set<uint32_t> ids;
    for (uint32_t c = 0; c < NPF_BITMAP_CLASSES; c++)
        for (uint32_t id = 0; id < NPF_MAX_FLOWS; id++) {
            uint32_t mapId = 0;
            if (bpf_map_lookup_elem(dp.regions(c), &id, &mapId) == 0)
                ids.insert(mapId);
        }
    return static_cast<uint32_t>(ids.size());
}

} // namespace npf::dataplane
