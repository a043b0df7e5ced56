// Packet patches: page images built in staging, installed with UFFDIO_COPY,
// memcpy for present pages, EEXIST when a page appeared behind the pager.
#include <sys/mman.h>

#include <cstring>

#include "region_fixture.h"

namespace npf::test {
namespace {

struct Shadow {
    explicit Shadow(size_t n) : bytes(n, 0) {}
    void put(uint64_t off, const std::vector<uint8_t>& v) { std::memcpy(&bytes[off], v.data(), v.size()); }
    std::vector<uint8_t> bytes;
};

// Compares the resident pages only: touching another one would block in a
// fault nobody serves.
void expectResidentPagesEqual(const Region& r, const Shadow& s)
{
    for (uint64_t p = 0; p < r.pages(); ++p)
        if (r.isResident(p * kPg, kPg)) {
            ASSERT_EQ(std::memcmp(r.base() + p * kPg, &s.bytes[p * kPg], kPg), 0) << "page " << p;
        }
}

struct PatchCase {
    const char* name;
    std::vector<std::pair<uint64_t, uint32_t>> patches; // offset, len
    uint64_t pagesInstalled;
    uint64_t copyCalls; // consecutive pages go in one UFFDIO_COPY
};

class RegionPatchCases : public ::testing::TestWithParam<PatchCase> {};

TEST_P(RegionPatchCases, ColdPagesGetTheImageWithEveryPayload)
{
    NPF_REQUIRE_UFFD();
    const PatchCase& c = GetParam();
    Region r(smallConfig(1ull << 20));
    Shadow shadow(r.size());
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<Patch> ps;
    uint32_t seed = 1;
    for (auto [off, len] : c.patches) {
        payloads.push_back(randomBytes(len, seed++));
        shadow.put(off, payloads.back());
    }
    for (size_t i = 0; i < c.patches.size(); ++i)
        ps.push_back({c.patches[i].first, payloads[i].data(), c.patches[i].second});
    std::vector<int> res(ps.size(), 1);
    BatchTiming t;
    ASSERT_EQ(r.applyPatches(ps, res, &t), static_cast<int>(ps.size()));
    for (int v : res)
        EXPECT_EQ(v, 0);
    RegionStats s = r.stats();
    EXPECT_EQ(s.packetFaults, c.pagesInstalled);
    EXPECT_EQ(s.pagesInstalled, c.pagesInstalled);
    EXPECT_EQ(s.copyCalls, c.copyCalls);
    EXPECT_EQ(s.cpuFaults, 0u);
    EXPECT_EQ(t.pages, c.pagesInstalled);
    EXPECT_LE(t.start, t.imageReady);
    EXPECT_LE(t.imageReady, t.copyDone);
    EXPECT_LE(t.copyDone, t.end);
    // Every touched page is resident; reading it cannot fault (no pager runs).
    for (auto [off, len] : c.patches) {
        EXPECT_TRUE(r.isResident(off, len));
    }
    expectResidentPagesEqual(r, shadow);
    EXPECT_EQ(r.residentPages(), c.pagesInstalled);
    EXPECT_EQ(memfdBytes(r), c.pagesInstalled * kPg);
}

INSTANTIATE_TEST_SUITE_P(
    Patches, RegionPatchCases,
    ::testing::Values(
        PatchCase{"single_page", {{5 * kPg + 100, 1472}}, 1, 1},
        PatchCase{"whole_page", {{3 * kPg, kPg}}, 1, 1},
        PatchCase{"spans_two_pages", {{2 * kPg - 700, 1400}}, 2, 1},
        PatchCase{"spans_three_pages", {{4 * kPg - 10, kPg + 20}}, 3, 1},
        PatchCase{"jumbo_spans_four", {{8 * kPg - 1, 9216}}, 4, 1},
        // An 8972-byte datagram as the pager patches it: one patch per UMEM
        // frame it arrived in (multi-buffer), with 4 KiB and with 2 KiB frames.
        PatchCase{"jumbo_in_4k_frame_pieces",
                  {{8 * kPg - 1, 3798}, {8 * kPg + 3797, 3840}, {8 * kPg + 7637, 1334}},
                  4,
                  1},
        PatchCase{"jumbo_in_2k_frame_pieces",
                  {{8 * kPg - 1, 1750},
                   {8 * kPg + 1749, 1792},
                   {8 * kPg + 3541, 1792},
                   {8 * kPg + 5333, 1792},
                   {8 * kPg + 7125, 1792},
                   {8 * kPg + 8917, 54}},
                  4,
                  1},
        PatchCase{"boundary_last_and_first_byte", {{kPg - 1, 1}, {kPg, 1}, {2 * kPg - 1, 1}}, 2, 1},
        PatchCase{"several_per_page", {{0, 64}, {64, 1472}, {1536, 1472}, {3008, 1088}, {100, 10}}, 1, 1},
        PatchCase{"two_runs", {{0, 8}, {kPg, 8}, {10 * kPg, 8}, {11 * kPg + 5, 8}}, 4, 2},
        PatchCase{"run_longer_than_batch", {{0, 70 * kPg}}, 70, 2}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RegionPatch, PatchesToResidentPagesAreCopiedInPlace)
{
    NPF_REQUIRE_UFFD();
    Region r(smallConfig(1ull << 20));
    auto a = randomBytes(3000, 7), b = randomBytes(4000, 8);
    int res[1];
    Patch pa{kPg + 10, a.data(), 3000};
    ASSERT_EQ(r.applyPatches({&pa, 1}, res), 1);
    Patch pb{kPg + 1000, b.data(), 4000}; // overlaps pa, its second page is new
    ASSERT_EQ(r.applyPatches({&pb, 1}, res), 1);
    RegionStats s = r.stats();
    EXPECT_EQ(s.packetFaults, 2u);
    EXPECT_EQ(s.patchesToResident, 1u);
    EXPECT_EQ(std::memcmp(r.base() + kPg + 10, a.data(), 990), 0);
    EXPECT_EQ(std::memcmp(r.base() + kPg + 1000, b.data(), 4000), 0);
}

TEST(RegionPatch, OutOfBoundsPatchesAreRejectedOthersPlaced)
{
    NPF_REQUIRE_UFFD();
    Region r(smallConfig(1ull << 20));
    auto a = randomBytes(100, 3);
    Patch ps[] = {{r.size() - 50, a.data(), 100}, {0, a.data(), 100}, {UINT64_MAX - 10, a.data(), 100}};
    int res[3];
    EXPECT_EQ(r.applyPatches(ps, res), 1);
    EXPECT_EQ(res[0], -EINVAL);
    EXPECT_EQ(res[1], 0);
    EXPECT_EQ(res[2], -EINVAL);
    EXPECT_EQ(r.residentPages(), 1u);
    int small[1];
    EXPECT_EQ(r.applyPatches(ps, small), -EINVAL);
}

// A second, unregistered mapping of the memfd makes a page present with a
// plain CPU fault the pager never sees; the packet patch then meets EEXIST
// and must patch in place, keeping what is there.
TEST(RegionPatch, EexistWhenPagePresentBehindThePager)
{
    NPF_REQUIRE_UFFD();
    Region r(smallConfig(1ull << 20));
    void* alias = ::mmap(nullptr, r.size(), PROT_READ | PROT_WRITE, MAP_SHARED, r.memfd(), 0);
    ASSERT_NE(alias, MAP_FAILED);
    auto* al = static_cast<uint8_t*>(alias);
    std::memset(al + 3 * kPg, 0x5a, kPg); // CPU fault on the alias populates page 3

    auto p = randomBytes(200, 11);
    // pages 2..4 in one run: 2 and 4 are installed, 3 hits EEXIST in the middle
    Patch ps[] = {{2 * kPg + 8, p.data(), 8}, {3 * kPg + 100, p.data(), 200}, {4 * kPg, p.data(), 16}};
    int res[3];
    ASSERT_EQ(r.applyPatches(ps, res), 3);
    RegionStats s = r.stats();
    EXPECT_EQ(s.eexist, 1u);
    EXPECT_EQ(s.pagesInstalled, 2u);
    EXPECT_EQ(s.residentPages, 3u);
    EXPECT_TRUE(r.isResident(2 * kPg, 3 * kPg));
    EXPECT_EQ(std::memcmp(r.base() + 3 * kPg + 100, p.data(), 200), 0);
    EXPECT_EQ(r.base()[3 * kPg + 99], 0x5a);
    EXPECT_EQ(r.base()[3 * kPg + 300], 0x5a);
    EXPECT_EQ(std::memcmp(r.base() + 2 * kPg + 8, p.data(), 8), 0);
    EXPECT_EQ(std::memcmp(r.base() + 4 * kPg, p.data(), 16), 0);
    ::munmap(alias, r.size());
}

TEST(RegionPatch, ExternalResidentBitmapIsSetAndClearedConservatively)
{
    NPF_REQUIRE_UFFD();
    std::vector<uint64_t> bitmap(4, ~0ull); // stale bits must be cleared at start
    RegionConfig c = smallConfig(256 * kPg);
    c.residentBitmap = bitmap.data();
    {
        Region r(c);
        EXPECT_EQ(bitmap[0] | bitmap[1] | bitmap[2] | bitmap[3], 0u);
        auto p = randomBytes(10, 1);
        Patch ps[] = {{65 * kPg + 5, p.data(), 10}};
        int res[1];
        ASSERT_EQ(r.applyPatches(ps, res), 1);
        EXPECT_EQ(bitmap[1], 2u);
        EXPECT_EQ(r.evictAll(), 1);
        EXPECT_EQ(bitmap[1], 0u);
        ASSERT_EQ(r.prefetch(0, 3 * kPg), 3);
        EXPECT_EQ(bitmap[0], 7u);
    }
    EXPECT_EQ(bitmap[0], 0u); // gone with the region
}

} // namespace
} // namespace npf::test
