// What npf-bench needs of the programs it starts (npfd, npf-recv) and their
// output files.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "sys/error.h"

namespace npf::bench {

// The program `name`: `built` (the build tree's, from CMake) if it exists,
// else the one next to npf-bench; throws ENOENT naming both.
inline std::string programPath(const std::string& built, const std::string& name)
{
    std::error_code ec;
    if (!built.empty() && std::filesystem::exists(built, ec))
        return built;
    const auto next = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / name;
    if (ec || !std::filesystem::exists(next, ec))
        throwErrno(ENOENT, "find " + name + " (neither " + (built.empty() ? "a build-tree " + name : built) +
                               " nor " + next.string() + " exists): build the " + name + " target");
    return next.string();
}

inline std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace npf::bench
