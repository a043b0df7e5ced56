#include "daemon/late_release.h"

#include <algorithm>

#include "npf/abi.h"

namespace npf::daemon {

std::optional<std::vector<ByteRange>> lateRelease(uint64_t offset, uint64_t len, std::span<const PostsSince> flows)
{
    constexpr uint64_t kPage = NPF_PAGE_SIZE;
    const uint64_t end = offset + len; // the caller checked it against the region
    std::vector<ByteRange> keep;       // page spans of later posts inside the range
    for (const PostsSince& f : flows) {
        const uint64_t now = f.reader.published();
        if (f.from >= now)
            continue;
        if (now - f.from > dataplane::PostSlots::kSize)
            return std::nullopt;
        for (uint64_t seq = f.from; seq < now; ++seq) {
            const dataplane::Post p = f.reader.slot(seq);
            const uint64_t first = p.offset / kPage * kPage;
            const uint64_t last = p.offset > UINT64_MAX - p.len - kPage
                                      ? UINT64_MAX
                                      : (p.offset + p.len + kPage - 1) / kPage * kPage;
            const uint64_t a = std::max(first, offset), b = std::min(last, end);
            if (a < b)
                keep.push_back({a, b - a});
        }
    }
    std::sort(keep.begin(), keep.end(), [](const ByteRange& x, const ByteRange& y) { return x.offset < y.offset; });
    std::vector<ByteRange> out;
    uint64_t at = offset;
    for (const ByteRange& k : keep) {
        if (k.offset > at)
            out.push_back({at, k.offset - at});
        at = std::max(at, k.offset + k.len);
    }
    if (at < end)
        out.push_back({at, end - at});
    return out;
}

} // namespace npf::daemon
