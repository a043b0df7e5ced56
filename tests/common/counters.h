// Named counters as tests read them from `npfctl stats --json`, and their deltas.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace npf::test {

using Counters = std::map<std::string, uint64_t>; // counter name -> value

// after - before, per name (a name missing from `before` counts from 0).
inline Counters delta(const Counters& after, const Counters& before)
{
    Counters d;
    for (const auto& [name, v] : after) {
        auto it = before.find(name);
        d[name] = v - (it == before.end() ? 0 : it->second);
    }
    return d;
}

} // namespace npf::test
