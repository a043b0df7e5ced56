#include "daemon/cgroup_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace npf::daemon {
namespace {

std::string readAll(const std::string& path)
{
    std::ifstream in(path);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// mountinfo escapes ' ', '\t', '\n' and '\\' as octal (\040).
std::string unescape(std::string_view s)
{
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '\\' && i + 3 < s.size()) {
            out += char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

std::vector<std::string_view> words(std::string_view line)
{
    std::vector<std::string_view> out;
    while (!line.empty()) {
        const size_t sp = line.find(' ');
        if (sp != 0)
            out.push_back(line.substr(0, sp));
        line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    }
    return out;
}

bool hasOption(std::string_view options, std::string_view want)
{
    while (!options.empty()) {
        const size_t comma = options.find(',');
        if (options.substr(0, comma) == want)
            return true;
        options = comma == std::string_view::npos ? std::string_view() : options.substr(comma + 1);
    }
    return false;
}

} // namespace

std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo)
{
    std::vector<CgroupMount> out;
    std::istringstream in{std::string(mountinfo)};
    std::string line;
    while (std::getline(in, line)) {
        // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
        const std::vector<std::string_view> w = words(line);
        size_t dash = 6;
        while (dash < w.size() && w[dash] != "-")
            dash++;
        if (dash + 3 >= w.size())
            continue;
        const std::string_view type = w[dash + 1], super = w[dash + 3];
        const bool v2 = type == "cgroup2";
        if (v2 || (type == "cgroup" && hasOption(super, "memory")))
            out.push_back({v2, unescape(w[3]), unescape(w[4])});
    }
    return out;
}

ProcCgroups parseProcCgroup(std::string_view text)
{
    ProcCgroups out;
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
        // ID:CONTROLLERS:PATH (the path may contain ':')
        const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos)
            continue;
        const std::string_view id = std::string_view(line).substr(0, a);
        const std::string_view controllers = std::string_view(line).substr(a + 1, b - a - 1);
        const std::string path = line.substr(b + 1);
        if (id == "0" && controllers.empty())
            out.v2 = path;
        else if (hasOption(controllers, "memory"))
            out.v1Memory = path;
    }
    return out;
}

std::optional<uint64_t> parseMemoryLimit(std::string_view text)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.remove_suffix(1);
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text == "max" || ec != std::errc() || end != text.data() + text.size() || v >= (uint64_t{1} << 62))
        return std::nullopt;
    return v;
}

std::vector<std::string> limitDirs(const CgroupMount& m, const std::string& path)
{
    if (path.empty() || path.front() != '/')
        return {};
    std::string rel;
    if (m.root == "/")
        rel = path;
    else if (path == m.root || path.rfind(m.root + "/", 0) == 0)
        rel = path.substr(m.root.size());
    else
        return {};
    std::vector<std::string> out;
    for (;;) {
        while (!rel.empty() && rel.back() == '/')
            rel.pop_back();
        out.push_back(m.point + rel);
        if (rel.empty())
            return out;
        rel.erase(rel.rfind('/'));
    }
}

std::optional<MemoryLimit> cgroupMemoryLimit()
{
    const ProcCgroups mine = parseProcCgroup(readAll("/proc/self/cgroup"));
    std::optional<MemoryLimit> best;
    for (const CgroupMount& m : parseCgroupMounts(readAll("/proc/self/mountinfo"))) {
        const std::string& path = m.v2 ? mine.v2 : mine.v1Memory;
        for (const std::string& dir : limitDirs(m, path)) {
            const std::string file = dir + (m.v2 ? "/memory.max" : "/memory.limit_in_bytes");
            const std::optional<uint64_t> v = parseMemoryLimit(readAll(file));
            if (v && (!best || *v < best->bytes))
                best = MemoryLimit{*v, file};
        }
    }
    return best;
}

} // namespace npf::daemon
