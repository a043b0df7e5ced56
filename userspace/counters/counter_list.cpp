#include "counters/counter_list.h"

namespace npf::counters {

Counters xdpCounters(const dataplane::XdpStats& s)
{
    Counters c;
    c.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i)
        c.push_back({"xdp", dataplane::kStatNames[i], s[i]});
    return c;
}

} // namespace npf::counters
