// What the standalone benchmarks (npf-bench, npf-uffd-bench, npf-xdp-bench)
// report the same way: facts about the machine, and the result as one JSON
// line on stdout (and in a file if asked); the options the micro-benchmarks
// share.
#pragma once

#include <sched.h>

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

// --cpu and --json of npf-uffd-bench and npf-xdp-bench.
struct CommonOptions {
    int cpu = -1;         // pin the benchmark to this CPU; -1: not pinned
    std::string jsonFile; // also write the JSON line here

    std::string cpuName() const { return cpu >= 0 ? std::to_string(cpu) : "not pinned"; }
};

template <typename App> // CLI::App
void addCommonOptions(App& app, CommonOptions& o)
{
    app.add_option("--cpu", o.cpu, "pin the benchmark to this CPU (default: not pinned)");
    app.add_option("--json", o.jsonFile, "also write the JSON line to this file");
}

// Pins the calling thread, before it starts any other, to o.cpu (if set).
inline void pinBenchmark(const CommonOptions& o)
{
    if (o.cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.cpu, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0)
        throwErrno("pin to CPU " + std::to_string(o.cpu));
}

} // namespace npf::bench
