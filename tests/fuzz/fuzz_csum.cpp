// The checksum helpers (sys/csum.h) against a byte-wise RFC 1071 reference:
// csumPartial and csumCopy of any length at any alignment, with a carried
// partial sum; and a buffer cut into blocks at arbitrary (odd) offsets whose
// sums are joined with csumAddAt. Buffers are heap blocks of exactly their
// size, so ASan reports any access outside them.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "sys/csum.h"

namespace {

// Ones' complement sum of the 16-bit words as they lie in memory (little
// endian here; odd length padded with a zero byte) plus `carried`, folded:
// 0 only for a zero sum, else 1 .. 0xffff.
uint16_t reference(const uint8_t* p, size_t len, uint64_t carried)
{
    unsigned __int128 s = carried;
    for (size_t i = 0; i < len; i += 2)
        s += p[i] | (i + 1 < len ? unsigned(p[i + 1]) << 8 : 0u);
    return s == 0 ? 0 : uint16_t((s - 1) % 0xffff + 1);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    FuzzedDataProvider in(data, size);
    const size_t srcAlign = in.ConsumeIntegralInRange<size_t>(0, 15);
    const size_t dstAlign = in.ConsumeIntegralInRange<size_t>(0, 15);
    const uint64_t carried = in.ConsumeIntegral<uint64_t>() >> 16; // a partial sum carried in: < 2^48
    std::vector<uint16_t> cuts(in.ConsumeIntegralInRange<size_t>(0, 6));
    for (uint16_t& c : cuts)
        c = in.ConsumeIntegral<uint16_t>();
    const std::vector<uint8_t> bytes = in.ConsumeRemainingBytes<uint8_t>();
    const size_t len = bytes.size();

    std::unique_ptr<uint8_t[]> srcBuf(new uint8_t[srcAlign + len]), dstBuf(new uint8_t[dstAlign + len]);
    uint8_t* src = srcBuf.get() + srcAlign;
    uint8_t* dst = dstBuf.get() + dstAlign;
    if (len)
        std::memcpy(src, bytes.data(), len);
    const uint16_t want = reference(src, len, carried);

    const uint16_t partial = npf::csumFold(npf::csumPartial(src, len, carried));
    NPF_FUZZ_CHECK(partial == want, "csumPartial 0x%04x, reference 0x%04x (len %zu, align %zu)", partial, want, len,
                   srcAlign);
    const uint16_t copy = npf::csumFold(npf::csumCopy(dst, src, len, carried));
    NPF_FUZZ_CHECK(copy == want, "csumCopy 0x%04x, reference 0x%04x (len %zu, align %zu -> %zu)", copy, want, len,
                   srcAlign, dstAlign);
    NPF_FUZZ_CHECK(len == 0 || std::memcmp(dst, src, len) == 0, "csumCopy copied wrong bytes");

    // Blocks [cut_i, cut_i+1), each summed (and copied) on its own, joined by offset.
    std::vector<size_t> at = {0, len};
    for (uint16_t c : cuts)
        at.push_back(len ? c % (len + 1) : 0);
    std::sort(at.begin(), at.end());
    std::memset(dst, 0, len);
    uint64_t summed = carried, copied = carried;
    for (size_t i = 0; i + 1 < at.size(); i++) {
        const size_t off = at[i], n = at[i + 1] - at[i];
        summed = npf::csumAddAt(summed, npf::csumPartial(src + off, n), off);
        copied = npf::csumAddAt(copied, npf::csumCopy(dst + off, src + off, n), off);
    }
    NPF_FUZZ_CHECK(npf::csumFold(summed) == want, "csumAddAt of %zu blocks 0x%04x, reference 0x%04x", at.size() - 1,
                   npf::csumFold(summed), want);
    NPF_FUZZ_CHECK(npf::csumFold(copied) == want, "csumAddAt of %zu copied blocks 0x%04x, reference 0x%04x",
                   at.size() - 1, npf::csumFold(copied), want);
    NPF_FUZZ_CHECK(len == 0 || std::memcmp(dst, src, len) == 0, "block copies differ from the source");
    return 0;
}
