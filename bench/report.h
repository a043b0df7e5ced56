// What the standalone benchmarks (npf-bench, npf-uffd-bench, npf-xdp-bench)
// report the same way: facts about the machine, and the result as one JSON
// line on stdout (and in a file if asked).
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

#include "sys/error.h"

namespace npf::bench {

// The value of the first "key ... : value" line of a /proc file, "" if none.
inline std::string procField(const std::string& path, const std::string& key)
{
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);)
        if (line.rfind(key, 0) == 0)
            return line.substr(line.find(':') + 2);
    return "";
}

inline std::string cpuModel()
{
    const std::string m = procField("/proc/cpuinfo", "model name");
    return m.empty() ? "?" : m;
}

// Prints `out` as one line on stdout and, unless `file` is empty, writes it there too.
template <typename J>
void emitJson(const J& out, const std::string& file)
{
    const std::string line = out.dump();
    std::printf("%s\n", line.c_str());
    if (file.empty())
        return;
    std::ofstream f(file);
    f << line << '\n';
    if (!f)
        throwErrno("write " + file);
}

} // namespace npf::bench
