#include "dataplane/bpf_info.h"

#include <algorithm>
#include <fstream>
#include <map>

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

bpf_map_info mapShape(int fd, const std::string& what)
{
    std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
    if (!in)
        throwErrno("read /proc/self/fdinfo of " + what);
    std::map<std::string, uint64_t> fields; // "key_size:\t4", "map_flags:\t0x400"
    for (std::string line; std::getline(in, line);) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos)
            continue;
        try {
            fields[line.substr(0, colon)] = std::stoull(line.substr(colon + 1), nullptr, 0);
        } catch (const std::exception&) { // a field that is not a number (owner_prog_type, ...)
        }
    }
    const char* keys[] = {"map_type", "key_size", "value_size", "max_entries", "map_flags"};
    for (const char* k : keys)
        if (!fields.count(k))
            throw StateError(EINVAL, what + " is not a BPF map (no " + k + " in its fdinfo)");
    bpf_map_info info{};
    info.type = static_cast<uint32_t>(fields["map_type"]);
    info.key_size = static_cast<uint32_t>(fields["key_size"]);
    info.value_size = static_cast<uint32_t>(fields["value_size"]);
    info.max_entries = static_cast<uint32_t>(fields["max_entries"]);
    info.map_flags = static_cast<uint32_t>(fields["map_flags"]);
    return info;
}

} // namespace npf::dataplane
