#include "plots.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace npf::bench {
namespace {

namespace fs = std::filesystem;

// "<prefix><contender>.dat" files present in dir, by contender name.
std::vector<std::string> series(const std::string& dir, const std::string& prefix)
{
    std::vector<std::string> v;
    for (const char* k : {"npf", "npf-reserve", "npf-pool", "npf-memfd", "npf-2m", "npf-2m-hugetlbfs", "npf-noprefetch", "drop-on-fault",
                          "blocking", "static-pinned", "xdp-drop", "recvmmsg", "io_uring"})
        if (fs::exists(dir + "/" + prefix + k + ".dat") && fs::file_size(dir + "/" + prefix + k + ".dat") > 40)
            v.push_back(k);
    return v;
}

void plotCmd(std::ofstream& gp, const std::string& prefix, const std::vector<std::string>& names, const char* using_)
{
    gp << "plot ";
    for (size_t i = 0; i < names.size(); i++)
        gp << (i ? ", " : "") << "'" << prefix << names[i] << ".dat' using " << using_ << " with lines lw 2 title '"
           << names[i] << "'";
    gp << "\n";
}

} // namespace

std::vector<std::string> makePlots(const std::string& dir, bool quiet)
{
    std::vector<std::string> made;
    std::ofstream gp(dir + "/plots.gp");
    gp << "set terminal pngcairo size 900,500 font 'sans,10'\nset grid\nset key outside right\n";
    auto cold = series(dir, "cold_");
    if (!cold.empty()) {
        gp << "set output 'cold_start.png'\nset title 'Cold ring: received throughput, 1 ms bins (region "
              "non-resident at t=0)'\nset xlabel 'ms since traffic start'\nset ylabel 'kpps'\nset xrange [0:*]\n";
        plotCmd(gp, "cold_", cold, "1:2");
        gp << "set output 'cold_start_zoom.png'\nset title 'Cold ring, first 100 ms'\nset xrange [0:100]\n";
        plotCmd(gp, "cold_", cold, "1:2");
        gp << "set xrange [*:*]\n";
        made.push_back("cold_start.png");
        made.push_back("cold_start_zoom.png");
    }
    auto pressure = series(dir, "pressure_");
    if (!pressure.empty()) {
        gp << "set output 'pressure.png'\nset title 'Memory pressure: received throughput, 10 ms averages (budget "
              "1/4 of the working set)'\nset xlabel 'ms since traffic start'\nset ylabel 'kpps'\nset xrange [0:*]\n";
        plotCmd(gp, "pressure_", pressure, "(floor($1/10)*10):2 smooth unique");
        made.push_back("pressure.png");
    }
    for (const char* sc : {"steady", "cold"}) {
        const std::string prefix = std::string("cdf_") + sc + "_";
        auto names = series(dir, prefix);
        if (names.empty())
            continue;
        gp << "set output 'latency_cdf_" << sc << ".png'\nset title 'One-way latency, generator to application ("
           << sc << ")'\nset xlabel 'latency (us, log)'\nset ylabel 'fraction of datagrams'\nset logscale x\n"
              "set yrange [0:1]\n";
        plotCmd(gp, prefix, names, "1:2");
        gp << "unset logscale x\nset yrange [*:*]\n";
        made.push_back(std::string("latency_cdf_") + sc + ".png");
    }
    gp.close();
    if (made.empty())
        return made;
    std::string cmd = "cd '" + dir + "' && gnuplot plots.gp" + (quiet ? " 2>/dev/null" : "");
    if (std::system(cmd.c_str()) != 0) {
        fprintf(stderr, "npf-bench: gnuplot failed or is missing (apt-get install gnuplot-nox); data files are in %s\n",
                dir.c_str());
        return {};
    }
    return made;
}

} // namespace npf::bench
