// Sizes on npf-recv's command line (apps/sizes.h, recv::parseSize): suffixes, and every bad input
// refused with the option's name instead of wrapping or being truncated.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "sizes.h"

namespace recv {
namespace {

TEST(Sizes, Valid)
{
    const std::pair<const char*, uint64_t> cases[] = {
        {"0", 0},
        {"1", 1},
        {"4096", 4096},
        {"007", 7},
        {"64K", 64ull << 10},
        {"64k", 64ull << 10},
        {"64KiB", 64ull << 10},
        {"64M", 64ull << 20},
        {"64m", 64ull << 20},
        {"64MiB", 64ull << 20},
        {"1G", 1ull << 30},
        {"1g", 1ull << 30},
        {"1GiB", 1ull << 30},
        {"1T", 1ull << 40},
        {"1t", 1ull << 40},
        {"1TiB", 1ull << 40},
        {"0T", 0},
        {"18446744073709551615", UINT64_MAX},
        {"17179869183G", UINT64_MAX - ((1ull << 30) - 1)},
        {"16777215T", UINT64_MAX - ((1ull << 40) - 1)},
    };
    for (auto [text, bytes] : cases)
        EXPECT_EQ(parseSize("--region", text), bytes) << text;
}

TEST(Sizes, InvalidNamesTheOptionAndTheValue)
{
    const std::string notASize = "is not a size (want a number with an optional K, M, G or T suffix)";
    const std::string tooLarge = "is too large (the limit is 16 EiB - 1 byte)";
    const std::pair<const char*, std::string> cases[] = {
        {"", notASize},
        {"-5", notASize},
        {"-0", notASize},
        {"+5", notASize},
        {" 5", notASize},
        {"5 ", notASize},
        {"5 K", notASize},
        {"K", notASize},
        {"1.5G", notASize},
        {"1e3", notASize},
        {"0x10", notASize},
        {"5KB", notASize},
        {"5kib", notASize},
        {"5P", notASize},
        {"5GG", notASize},
        {"abc", notASize},
        {"99999999999999999999X", notASize},
        {"18446744073709551616", tooLarge},
        {"99999999999999999999", tooLarge},
        {"17179869184G", tooLarge},
        {"17179869185G", tooLarge},
        {"16777216T", tooLarge},
        {"17592186044417M", tooLarge},
        {"18014398509481984K", tooLarge},
    };
    for (const auto& [text, why] : cases) {
        SCOPED_TRACE(std::string("'") + text + "'");
        try {
            parseSize("--budget", text);
            ADD_FAILURE() << "accepted";
        } catch (const std::invalid_argument& e) {
            EXPECT_EQ(e.what(), "--budget: '" + std::string(text) + "' " + why);
        }
    }
}

} // namespace
} // namespace recv
