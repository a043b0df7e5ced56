// The Internet checksum (RFC 1071) of bytes in memory order, folded into
// copies the data path makes anyway (the kernel's csum-and-copy idea): 32-bit
// words summed into 64-bit lanes (AVX2 when the CPU has it, else SSE2),
// folded to 16 bits at the end. Memory order on both sides means no byte swaps: the XDP program sums
// the pseudo-header the same way (npf_meta.csum), and a datagram is intact
// when csumFold(payload sum + npf_meta.csum) == 0xffff.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
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

namespace detail {

// Sums (and with Copy, copies) len bytes; 16 or 32 bytes a step, each 32-bit
// lane widened into a 64-bit lane, so the accumulator cannot overflow for
// any datagram. The tail is summed as 32-bit words, the last one padded with
// zero bytes.
template <bool Copy>
inline uint64_t sumTail(uint8_t* dst, const uint8_t* src, size_t i, size_t len, uint64_t sum) noexcept
{
    for (; i + 4 <= len; i += 4) {
        uint32_t w;
        std::memcpy(&w, src + i, 4);
        if constexpr (Copy)
            std::memcpy(dst + i, &w, 4);
        sum += w;
    }
    if (i < len) {
        uint32_t w = 0;
        std::memcpy(&w, src + i, len - i);
        if constexpr (Copy)
            std::memcpy(dst + i, src + i, len - i);
        sum += w;
    }
    return sum;
}

#if defined(__x86_64__)
template <bool Copy>
__attribute__((target("avx2"))) inline uint64_t sumAvx2(uint8_t* dst, const uint8_t* src, size_t len,
                                                          uint64_t sum) noexcept
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i acc = zero;
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
        if constexpr (Copy)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), v);
        acc = _mm256_add_epi64(acc, _mm256_unpacklo_epi32(v, zero));
        acc = _mm256_add_epi64(acc, _mm256_unpackhi_epi32(v, zero));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), acc);
    return sumTail<Copy>(dst, src, i, len, sum + lanes[0] + lanes[1] + lanes[2] + lanes[3]);
}
#endif

template <bool Copy>
inline uint64_t sumBytes(uint8_t* dst, const uint8_t* src, size_t len, uint64_t sum) noexcept
{
#if defined(__x86_64__)
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2)
        return sumAvx2<Copy>(dst, src, len, sum);
#endif
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    __m128i acc = zero;
    for (; i + 16 <= len; i += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        if constexpr (Copy)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), v);
        acc = _mm_add_epi64(acc, _mm_unpacklo_epi32(v, zero));
        acc = _mm_add_epi64(acc, _mm_unpackhi_epi32(v, zero));
    }
    uint64_t lanes[2];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), acc);
    sum += lanes[0] + lanes[1];
#endif
    return sumTail<Copy>(dst, src, i, len, sum);
}

} // namespace detail

// Copies len bytes from src to dst and returns sum plus their ones'
// complement sum (unfolded). dst and src must not overlap.
inline uint64_t csumCopy(uint8_t* dst, const uint8_t* src, size_t len, uint64_t sum = 0) noexcept
{
    return detail::sumBytes<true>(dst, src, len, sum);
}

// The ones' complement sum of len bytes (unfolded), without copying.
inline uint64_t csumPartial(const uint8_t* src, size_t len, uint64_t sum = 0) noexcept
{
    return detail::sumBytes<false>(nullptr, src, len, sum);
}

} // namespace npf
