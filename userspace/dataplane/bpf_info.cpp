#include "dataplane/bpf_info.h"

#include <fstream>
#include <map>

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
