// Forward declarations of a region's parts, for the headers that only keep
// references to them (the installers; RegionCounters is an alias: region_stats.h).
#pragma once

namespace npf {

class MmapArea;
class PageIo;
class PageState;
class PatchPlan;
class SpillFile;
class Userfaultfd;

} // namespace npf
