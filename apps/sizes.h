// Byte sizes on npf-recv's command line: "4096", "64K", "1G".
#pragma once

#include <cstdint>
#include <string>

namespace recv {

// Decimal digits with an optional binary suffix: K, M, G, T (also k, m, g, t
// and KiB, MiB, GiB, TiB). Throws std::invalid_argument naming `option` for
// anything else (signs, spaces, fractions) and for more than 2^64 - 1 bytes.
uint64_t parseSize(const std::string& option, const std::string& text);

} // namespace recv
