// sys/csum.h against a byte-wise RFC 1071 reference: every length up to two
// AVX2 steps and beyond, every source alignment, blocks at odd offsets.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sys/csum.h"

namespace npf {
namespace {

// RFC 1071 over bytes in memory order: little-endian 16-bit words, the last
// odd byte padded with zero.
uint16_t reference(const uint8_t* p, size_t len)
{
    uint32_t sum = 0;
    for (size_t i = 0; i < len; i += 2)
        sum += p[i] | (i + 1 < len ? uint32_t(p[i + 1]) << 8 : 0);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(sum);
}

// 0x0000 and 0xffff are both zero in ones' complement.
uint16_t canon(uint16_t v) { return v == 0xffff ? 0 : v; }

TEST(Csum, CopyAndPartialMatchTheReferenceForEveryLengthAndAlignment)
{
    std::mt19937 rng(7);
    std::vector<uint8_t> src(9300), dst(9300);
    for (auto& b : src)
        b = uint8_t(rng());
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 200; n++)
        lens.push_back(n);
    for (size_t n : {1471u, 1472u, 1473u, 4095u, 4096u, 8972u, 9216u})
        lens.push_back(n);
    for (size_t align = 0; align < 8; align++)
        for (size_t len : lens) {
            const uint8_t* s = src.data() + align;
            std::fill(dst.begin(), dst.end(), 0xa5);
            const uint16_t want = canon(reference(s, len));
            ASSERT_EQ(canon(csumFold(csumPartial(s, len))), want) << "len " << len << " align " << align;
            ASSERT_EQ(canon(csumFold(csumCopy(dst.data() + 1, s, len))), want) << "len " << len << " align " << align;
            ASSERT_TRUE(std::equal(s, s + len, dst.data() + 1)) << "copy of " << len << " bytes differs";
            ASSERT_EQ(dst[0], 0xa5);
            ASSERT_EQ(dst[1 + len], 0xa5) << "wrote past " << len << " bytes";
        }
}

TEST(Csum, BlocksAtAnyOffsetAddUp)
{
    std::mt19937 rng(11);
    std::vector<uint8_t> data(3001);
    for (auto& b : data)
        b = uint8_t(rng());
    const uint16_t whole = canon(reference(data.data(), data.size()));
    for (size_t cut : {0u, 1u, 2u, 3u, 7u, 1471u, 1472u, 3000u, 3001u}) {
        const uint64_t head = csumPartial(data.data(), cut);
        const uint64_t tail = csumPartial(data.data() + cut, data.size() - cut);
        EXPECT_EQ(canon(csumFold(csumAddAt(head, tail, cut))), whole) << "cut at " << cut;
    }
}

} // namespace
} // namespace npf
