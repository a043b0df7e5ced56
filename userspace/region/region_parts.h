// The parts of a Region that its installers and its evictor work on, by
// reference: they belong to the region (or to a test's stand-in) and are
// filled in before the first install or eviction. The forward declarations
// of the region's parts, for the headers that name them.
#pragma once

#include <string>

#include "region/region_stats.h"

namespace npf {

class MmapArea;
class PageIo;
class PageState;
class PatchPlan;
class SpillFile;
class Userfaultfd;

struct RegionParts {
    const Userfaultfd& uffd; // registered over io's mapping
    const PageIo& io;
    PageState& state;
    const SpillFile& spill;
    const PatchPlan& plan;
    RegionCounters& counters;
    const std::string& name; // for the log
};

} // namespace npf
