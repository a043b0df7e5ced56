// The counting side of a counter table (npf/counters.h): one relaxed atomic
// per entry, bumped by name (tally.add<&Stats::field>()), added into the
// table's Stats struct by one loop. Every thread that counts keeps its own
// Tally; a snapshot adds them all up, so no counter is copied by hand and a
// field missing from the table is a compile error where it is bumped.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace npf {

template <const auto& Table>
class Tally {
public:
    using Stats = typename std::remove_cvref_t<decltype(Table[0])>::Stats;

    template <uint64_t Stats::*Member>
    void add(uint64_t n = 1) noexcept
    {
        v_[indexOf(Member)].fetch_add(n, std::memory_order_relaxed);
    }
    template <uint64_t Stats::*Member>
    uint64_t get() const noexcept
    {
        return v_[indexOf(Member)].load(std::memory_order_relaxed);
    }
    // Adds every counter into `s` (any thread; relaxed).
    void addTo(Stats& s) const noexcept
    {
        for (size_t i = 0; i < Table.size(); ++i)
            s.*Table[i].member += v_[i].load(std::memory_order_relaxed);
    }

private:
    static consteval size_t indexOf(uint64_t Stats::*m)
    {
        for (size_t i = 0; i < Table.size(); ++i)
            if (Table[i].member == m)
                return i;
        throw "not a member of the counter table"; // a compile error
    }
    std::array<std::atomic<uint64_t>, Table.size()> v_{};
};

} // namespace npf
