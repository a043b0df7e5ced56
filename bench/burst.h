// The burst scenario: trafgen into npf-recv on a cold region (burst.cpp).
#pragma once

#include "scenarios.h"

namespace npf::bench {

Json burst(const Options& o);

} // namespace npf::bench
