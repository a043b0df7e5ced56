// The Internet checksum (RFC 1071) of bytes in memory order, folded into
// copies the data path makes anyway (the kernel's csum-and-copy idea): a
// 64-bit accumulator of 32-bit little-endian words, folded to 16 bits at the
// end. Memory order on both sides means no byte swaps: the XDP program sums
// the pseudo-header the same way (npf_meta.csum), and a datagram is intact
// when csumFold(payload sum + npf_meta.csum) == 0xffff.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npf {

// Ones' complement sum folded to 16 bits (not inverted).
constexpr uint16_t csumFold(uint64_t sum) noexcept
{
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

// Adds the sum of a block that starts `offset` bytes into the checksummed
// data: a block at an odd offset has its bytes in the other half of each word.
constexpr uint64_t csumAddAt(uint64_t sum, uint64_t block, uint64_t offset) noexcept
{
    if (offset & 1) {
        const uint16_t f = csumFold(block);
        block = static_cast<uint16_t>((f << 8) | (f >> 8));
    }
    return sum + block;
}

// Copies len bytes from src to dst and returns sum plus their ones'
// complement sum (unfolded). dst and src must not overlap.
inline uint64_t csumCopy(uint8_t* dst, const uint8_t* src, size_t len, uint64_t sum = 0) noexcept
{
    size_t i = 0;
#if defined(__SSE2__)
    // 16 bytes a step: each 32-bit lane widened into a 64-bit lane, so the
    // accumulator cannot overflow for any datagram.
    const __m128i zero = _mm_setzero_si128();
    __m128i acc = zero;
    for (; i + 16 <= len; i += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), v);
        acc = _mm_add_epi64(acc, _mm_unpacklo_epi32(v, zero));
        acc = _mm_add_epi64(acc, _mm_unpackhi_epi32(v, zero));
    }
    uint64_t lanes[2];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), acc);
    sum += lanes[0] + lanes[1];
#endif
    for (; i + 4 <= len; i += 4) {
        uint32_t w;
        std::memcpy(&w, src + i, 4);
        std::memcpy(dst + i, &w, 4);
        sum += w;
    }
    if (i < len) {
        uint32_t w = 0; // the last word is padded with zero bytes
        std::memcpy(&w, src + i, len - i);
        std::memcpy(dst + i, src + i, len - i);
        sum += w;
    }
    return sum;
}

// The ones' complement sum of len bytes (unfolded), without copying.
inline uint64_t csumPartial(const uint8_t* src, size_t len, uint64_t sum = 0) noexcept
{
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        std::memcpy(&w, src + i, 8);
        sum += (w & 0xffffffff) + (w >> 32);
    }
    for (; i + 4 <= len; i += 4) {
        uint32_t w;
        std::memcpy(&w, src + i, 4);
        sum += w;
    }
    if (i < len) {
        uint32_t w = 0;
        std::memcpy(&w, src + i, len - i);
        sum += w;
    }
    return sum;
}

} // namespace npf
