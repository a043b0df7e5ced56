#include "dataplane/bpf_info.h"

#include <algorithm>

#include "sys/error.h"
#include "sys/fd.h"

namespace npf::dataplane {

std::optional<std::string> progName(uint32_t id)
{
    Fd fd(bpf_prog_get_fd_by_id(id));
    if (!fd)
        return errno == EPERM || errno == EACCES ? std::nullopt : std::optional<std::string>("");
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) != 0)
        return "";
    return std::string(info.name);
}

ProgInfo progInfo(int fd, const std::string& what)
{
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        throwErrno("read program info of " + what);
    ProgInfo out{info.id, std::vector<uint32_t>(info.nr_map_ids)};
    info = {};
    info.nr_map_ids = static_cast<uint32_t>(out.mapIds.size());
    info.map_ids = reinterpret_cast<uint64_t>(out.mapIds.data());
    len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        throwErrno("read the map ids of " + what);
    out.mapIds.resize(std::min<size_t>(out.mapIds.size(), info.nr_map_ids));
    return out;
}

bpf_map_info mapInfo(int fd, const std::string& what)
{
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        throwErrno("read map info of " + what);
    return info;
}

} // namespace npf::dataplane
