#include "dataplane/bpf_info.h"

#include "sys/error.h"
#include "sys/fd.h"

namespace npf::dataplane {
namespace {

bool progInfo(uint32_t id, bpf_prog_info* info, std::vector<uint32_t>* maps)
{
    Fd fd(bpf_prog_get_fd_by_id(id));
    if (!fd) {
        if (errno == EPERM || errno == EACCES)
            throwErrno("open BPF program id " + std::to_string(id));
        return false;
    }
    *info = {};
    uint32_t len = sizeof(*info);
    if (bpf_obj_get_info_by_fd(fd.get(), info, &len) != 0)
        return false;
    if (!maps)
        return true;
    uint32_t n = info->nr_map_ids;
    maps->assign(n, 0);
    *info = {};
    info->nr_map_ids = n;
    info->map_ids = reinterpret_cast<uint64_t>(maps->data());
    len = sizeof(*info);
    if (bpf_obj_get_info_by_fd(fd.get(), info, &len) != 0)
        return false;
    maps->resize(std::min(n, info->nr_map_ids));
    return true;
}

} // namespace

std::string progName(uint32_t id)
{
    bpf_prog_info info{};
    return progInfo(id, &info, nullptr) ? std::string(info.name) : std::string();
}

std::vector<uint32_t> progMapIds(uint32_t id)
{
    bpf_prog_info info{};
    std::vector<uint32_t> maps;
    if (!progInfo(id, &info, &maps))
        maps.clear();
    return maps;
}

bpf_map_info mapInfo(int fd, const std::string& what)
{
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        throwErrno("read map info of " + what);
    return info;
}

std::optional<uint32_t> findProgUsingMap(uint32_t mapId, const std::string& name)
{
    uint32_t id = 0;
    while (bpf_prog_get_next_id(id, &id) == 0) {
        bpf_prog_info info{};
        std::vector<uint32_t> maps;
        if (!progInfo(id, &info, &maps) || name != info.name)
            continue;
        for (uint32_t m : maps)
            if (m == mapId)
                return id;
    }
    return std::nullopt;
}

} // namespace npf::dataplane
