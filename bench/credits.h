// The credits scenario: npf-send into npf-recv on a cold region, with
// credits and without (credits.cpp).
#pragma once

#include "scenarios.h"

namespace npf::bench {

Json credits(const Options& o);

} // namespace npf::bench
