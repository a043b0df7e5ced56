// PNG plots of a run with gnuplot (data files written by the scenarios).
#pragma once

#include <string>
#include <vector>

namespace npf::bench {

// Writes <dir>/plots.gp and runs gnuplot on it; returns the PNGs made
// (empty if gnuplot is missing or failed, which is reported, not fatal).
std::vector<std::string> makePlots(const std::string& dir, bool quiet);

} // namespace npf::bench
