// recv::parseSize (npf-recv's apps/sizes.h) on arbitrary text, against a reference parser of sizes.h's
// grammar (decimal digits, optional K/M/G/T, k/m/g/t or KiB..TiB suffix, at
// most 2^64 - 1 bytes). Anything else must be an std::invalid_argument that names
// the option and says which rule the text broke; no other exception.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "sizes.h"

namespace {

enum class Want { Ok, NotASize, TooLarge };

Want reference(std::string_view t, uint64_t* bytes)
{
    size_t digits = 0;
    while (digits < t.size() && t[digits] >= '0' && t[digits] <= '9')
        digits++;
    if (digits == 0)
        return Want::NotASize;
    static constexpr std::pair<std::string_view, unsigned> units[] = {
        {"", 0},   {"K", 10}, {"k", 10}, {"KiB", 10}, {"M", 20}, {"m", 20}, {"MiB", 20},
        {"G", 30}, {"g", 30}, {"GiB", 30}, {"T", 40}, {"t", 40}, {"TiB", 40}};
    const std::string_view suffix = t.substr(digits);
    int shift = -1;
    for (auto [s, sh] : units)
        if (s == suffix)
            shift = int(sh);
    if (shift < 0)
        return Want::NotASize;
    unsigned __int128 v = 0;
    for (size_t i = 0; i < digits; i++) {
        v = v * 10 + unsigned(t[i] - '0');
        if (v > UINT64_MAX)
            return Want::TooLarge;
    }
    v <<= shift;
    if (v > UINT64_MAX)
        return Want::TooLarge;
    *bytes = uint64_t(v);
    return Want::Ok;
}

const char* name(Want w) { return w == Want::Ok ? "ok" : w == Want::NotASize ? "not a size" : "too large"; }

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    uint64_t want = 0;
    const Want w = reference(text, &want);
    Want got = Want::Ok;
    uint64_t bytes = 0;
    try {
        bytes = recv::parseSize("--size", text);
    } catch (const std::invalid_argument& e) {
        // The message quotes the text, then says why. what() is a C string, so
        // a NUL in the text ends it there: then only "refused" can be checked.
        const std::string msg = e.what(), quoted = "--size: '" + text + "'";
        const size_t nul = text.find('\0');
        if (nul != std::string::npos) {
            NPF_FUZZ_CHECK(msg == quoted.substr(0, 9 + nul), "message: %s", msg.c_str());
            got = w == Want::Ok ? Want::NotASize : w;
        } else {
            NPF_FUZZ_CHECK(msg.rfind(quoted, 0) == 0, "message does not quote the option and text: %s", msg.c_str());
            const std::string why = msg.substr(quoted.size());
            got = why.rfind(" is too large", 0) == 0    ? Want::TooLarge
                  : why.rfind(" is not a size", 0) == 0 ? Want::NotASize
                                                        : Want::Ok;
            NPF_FUZZ_CHECK(got != Want::Ok, "unexplained error: %s", msg.c_str());
        }
    }
    NPF_FUZZ_CHECK(got == w, "parseSize: %s, reference: %s (%zu bytes of text)", name(got), name(w), size);
    NPF_FUZZ_CHECK(got != Want::Ok || bytes == want, "parseSize %llu, reference %llu", (unsigned long long)bytes,
                   (unsigned long long)want);
    return 0;
}
