// The names of a region's routes (where its pages come from), as the
// engine's stats JSON ("route"), npf-recv's summary and npf-bench print
// them: defined once, here (docs/architecture.md, "Where a region's pages
// come from").
#pragma once

namespace npf::routes {

inline constexpr const char* kPool4k = "pool-4k";
inline constexpr const char* kPool2mThp = "pool-2m-thp";
inline constexpr const char* kAnon4k = "anon-4k";
inline constexpr const char* kAnon2mThp = "anon-2m-thp";
inline constexpr const char* kMemfd4k = "memfd-4k";
inline constexpr const char* kHugetlbfs2m = "hugetlbfs-2m";
// An npfd client's memory: its memfd, or its hugetlbfs file.
inline constexpr const char* kClientMemfd4k = "client-memfd-4k";
inline constexpr const char* kClientHugetlbfs2m = "client-hugetlbfs-2m";

} // namespace npf::routes
