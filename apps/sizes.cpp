#include "sizes.h"

#include <charconv>
#include <stdexcept>
#include <string_view>

namespace recv {
namespace {

struct Unit {
    std::string_view suffix;
    unsigned shift;
};

constexpr Unit kUnits[] = {
    {"", 0},
    {"K", 10}, {"k", 10}, {"KiB", 10},
    {"M", 20}, {"m", 20}, {"MiB", 20},
    {"G", 30}, {"g", 30}, {"GiB", 30},
    {"T", 40}, {"t", 40}, {"TiB", 40},
};

const Unit* findUnit(std::string_view suffix)
{
    for (const Unit& u : kUnits)
        if (u.suffix == suffix)
            return &u;
    return nullptr;
}

} // namespace

uint64_t parseSize(const std::string& option, const std::string& text)
{
    const std::string what = option + ": '" + text + "'";
    uint64_t n = 0;
    const char* end = text.data() + text.size();
    auto [rest, ec] = std::from_chars(text.data(), end, n); // digits only: no sign, no space
    const Unit* unit = ec == std::errc::invalid_argument ? nullptr : findUnit(std::string_view(rest, end - rest));
    if (!unit)
        throw std::invalid_argument(what + " is not a size (want a number with an optional K, M, G or T suffix)");
    if (ec == std::errc::result_out_of_range || n > (UINT64_MAX >> unit->shift))
        throw std::invalid_argument(what + " is too large (the limit is 16 EiB - 1 byte)");
    return n << unit->shift;
}

} // namespace recv
