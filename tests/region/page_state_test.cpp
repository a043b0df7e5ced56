// PageState without any userfaultfd: the per-page bits, the clock's second
// chance and protect skipping, release (whole pages, and 4 KiB pieces of
// 2 MiB pages adding up to a page), XDP's resident bits (1 per 4 KiB page,
// 512 per 2 MiB page) and the resident count.
#include "region/page_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "region/region.h"

namespace npf::test {
namespace {

constexpr uint64_t kPg = NPF_PAGE_SIZE;
constexpr uint64_t kHuge = kHugePageSize;
constexpr uint32_t kHugeShift = 21;

int popcount(const std::vector<uint64_t>& v)
{
    int n = 0;
    for (uint64_t w : v)
        n += __builtin_popcountll(w);
    return n;
}

// Takes up to `want` victims, sorted.
std::vector<uint64_t> victims(PageState& s, size_t want, bool ignoreReferenced)
{
    std::vector<uint64_t> out(want);
    out.resize(s.takeVictims(out, ignoreReferenced));
    std::sort(out.begin(), out.end());
    return out;
}

TEST(PageState, InstalledPagesArePresentCountedAndResident)
{
    std::vector<uint64_t> bitmap(2, ~0ull); // stale bits are cleared
    PageState s(128 * kPg, NPF_PAGE_SHIFT, bitmap.data(), "test");
    EXPECT_EQ(s.pages(), 128u);
    EXPECT_EQ(bitmap[0] | bitmap[1], 0u);
    s.markInstalled(3);
    s.markInstalled(64);
    EXPECT_TRUE(s.present(3));
    EXPECT_FALSE(s.present(4));
    EXPECT_EQ(s.residentPages(), 2u);
    EXPECT_EQ(bitmap[0], 1ull << 3) << "one bit per 4 KiB page";
    EXPECT_EQ(bitmap[1], 1u);
    EXPECT_TRUE(s.isResident(3 * kPg, kPg));
    EXPECT_FALSE(s.isResident(3 * kPg, kPg + 1));
    EXPECT_TRUE(s.isResident(0, 0));
    EXPECT_FALSE(s.isResident(128 * kPg, 1)) << "out of the region";
    EXPECT_FALSE(s.isResident(0, 129 * kPg));

    s.clearResident(3);
    EXPECT_FALSE(s.isResident(3 * kPg, 1));
    EXPECT_TRUE(s.present(3)) << "the pager's view is separate from XDP's bits";
    s.markEvicted(3);
    EXPECT_FALSE(s.present(3));
    EXPECT_EQ(s.residentPages(), 1u);

    s.setSaved(64);
    EXPECT_TRUE(s.saved(64));
    s.markKept(64); // a victim that stays: saved copy stale, bits back
    EXPECT_FALSE(s.saved(64));
    EXPECT_EQ(bitmap[1], 1u);
}

TEST(PageState, HugePagesSet512ResidentBitsEach)
{
    std::vector<uint64_t> bitmap(PageState::bitmapWords(4 * kHuge), 0);
    ASSERT_EQ(bitmap.size(), 4 * 512 / 64u);
    PageState s(4 * kHuge, kHugeShift, bitmap.data(), "test");
    EXPECT_EQ(s.pages(), 4u);
    s.markInstalled(2);
    EXPECT_EQ(popcount(bitmap), 512);
    for (size_t w = 0; w < bitmap.size(); ++w)
        EXPECT_EQ(bitmap[w], w / 8 == 2 ? ~0ull : 0u) << "word " << w;
    EXPECT_TRUE(s.isResident(2 * kHuge, kHuge));
    EXPECT_FALSE(s.isResident(3 * kHuge - 1, 2));
    s.clearResident(2);
    EXPECT_EQ(popcount(bitmap), 0);
    s.setResident(1);
    EXPECT_EQ(popcount(bitmap), 512);
    EXPECT_EQ(s.residentPages(), 1u) << "the count is of 2 MiB pages";
}

TEST(PageState, ResidentBitsGoWithTheStateThatOwnsThem)
{
    std::vector<uint64_t> bitmap(1, 0);
    {
        PageState a(64 * kPg, NPF_PAGE_SHIFT, bitmap.data(), "test");
        a.markInstalled(5);
        PageState b = std::move(a);
        {
            PageState gone = std::move(b);
            b = std::move(gone);
        }
        EXPECT_EQ(bitmap[0], 1ull << 5) << "a moved-from state leaves the bits alone";
        EXPECT_EQ(b.residentPages(), 1u);
    }
    EXPECT_EQ(bitmap[0], 0u) << "cleared when the state is destroyed";
}

TEST(PageState, ClockGivesReferencedPagesASecondChance)
{
    PageState s(64 * kPg, NPF_PAGE_SHIFT, nullptr, "test");
    for (uint64_t p : {0, 1, 2, 3})
        s.markInstalled(p); // installed pages start referenced
    EXPECT_EQ(s.clockLength(), 4u);
    // The first pass takes every second chance; the second finds victims.
    EXPECT_EQ(victims(s, 2, false), (std::vector<uint64_t>{0, 1}));
    s.markEvicted(0);
    s.markEvicted(1);
    s.markReferenced(2 * kPg + 100, 1);
    EXPECT_EQ(victims(s, 1, false), (std::vector<uint64_t>{3})) << "page 2 was written: its second chance";
    EXPECT_EQ(victims(s, 1, false), (std::vector<uint64_t>{2})) << "and it has used it";
    EXPECT_EQ(s.clockLength(), 0u);
    EXPECT_TRUE(victims(s, 4, false).empty());
}

TEST(PageState, ClockSkipsProtectedAndForgetsEvictedPages)
{
    PageState s(64 * kPg, NPF_PAGE_SHIFT, nullptr, "test");
    for (uint64_t p : {0, 1, 2, 3})
        s.markInstalled(p);
    s.protect(kPg + 10, 2 * kPg); // pages 1..2 and 3: 10 bytes into page 3
    s.protect(kPg, 1);
    EXPECT_EQ(s.protectCount(1), 2u);
    EXPECT_EQ(s.protectCount(3), 1u);
    EXPECT_EQ(s.protectCount(64), 0u) << "out of the region";
    EXPECT_EQ(victims(s, 4, true), (std::vector<uint64_t>{0}));
    EXPECT_EQ(s.clockLength(), 3u) << "protected pages stay on the clock";

    s.unprotect(kPg + 10, 2 * kPg);
    EXPECT_EQ(victims(s, 4, true), (std::vector<uint64_t>{2, 3}));
    s.unprotect(kPg, 1);
    s.unprotect(kPg, 1); // more than protect(): stays at zero
    EXPECT_EQ(s.protectCount(1), 0u);
    // A page evicted while still on the clock is dropped when the hand meets it.
    s.markEvicted(1);
    EXPECT_TRUE(victims(s, 4, true).empty());
    EXPECT_EQ(s.clockLength(), 0u);
    // A victim kept (its eviction failed) is back on the clock.
    s.markKept(2);
    EXPECT_EQ(victims(s, 4, true), (std::vector<uint64_t>{2}));
}

// Protection within a limit (Region: what eviction leaves resident): a range
// that would protect more pages than the limit at once is refused whole;
// pages already protected cost nothing more; holds and protectAlways() are
// never refused, and count.
TEST(PageState, ProtectionStaysWithinItsLimit)
{
    PageState s(64 * kPg, NPF_PAGE_SHIFT, nullptr, "test");
    s.limitProtection(4);
    EXPECT_FALSE(s.protect(0, 64 * kPg)) << "the whole region, over a limit of 4 pages";
    EXPECT_EQ(s.protectedPages(), 0u);
    EXPECT_EQ(s.protectCount(0), 0u) << "a refused range protects none of its pages";
    EXPECT_TRUE(s.protect(0, 3 * kPg));
    EXPECT_FALSE(s.protect(3 * kPg, 2 * kPg)) << "3 + 2 pages";
    EXPECT_TRUE(s.protect(kPg, 2 * kPg)) << "pages 1 and 2 are protected already";
    EXPECT_EQ(s.protectCount(1), 2u);
    EXPECT_TRUE(s.protect(3 * kPg, kPg));
    EXPECT_EQ(s.protectedPages(), 4u);
    s.hold(10);
    s.protectAlways(20 * kPg, 2 * kPg);
    EXPECT_EQ(s.protectedPages(), 7u) << "held and always-protected pages count";
    EXPECT_FALSE(s.protect(30 * kPg, 1));
    s.unhold(10);
    s.unprotect(20 * kPg, 2 * kPg);
    s.unprotect(0, 3 * kPg);
    EXPECT_EQ(s.protectedPages(), 3u) << "pages 1, 2 (once more) and 3";
    s.unprotect(kPg, 2 * kPg);
    s.unprotect(3 * kPg, kPg);
    EXPECT_EQ(s.protectedPages(), 0u);
    EXPECT_TRUE(s.protect(0, 4 * kPg));
}

// hold(): the pager's reference on a page it allocates outside the lock
// (Region::preallocate). Eviction skips the page like a protected one, and,
// unlike protect(), a release stays.
TEST(PageState, HeldPagesAreNotVictimsAndStayReleased)
{
    PageState s(64 * kPg, NPF_PAGE_SHIFT, nullptr, "test");
    for (uint64_t p : {0, 1})
        s.markInstalled(p);
    auto none = [](uint64_t) {};
    EXPECT_EQ(s.release(0, 2 * kPg, none), 2);
    s.hold(1);
    EXPECT_EQ(s.protectCount(1), 1u);
    EXPECT_FALSE(s.mustSave(1)) << "hold() must not end a release";
    EXPECT_EQ(victims(s, 4, true), (std::vector<uint64_t>{0}));
    s.unhold(1);
    EXPECT_EQ(s.protectCount(1), 0u);
    EXPECT_EQ(victims(s, 4, true), (std::vector<uint64_t>{1}));
}

TEST(PageState, ReleasedPagesAreDroppedUnlessWrittenAgain)
{
    PageState s(64 * kPg, NPF_PAGE_SHIFT, nullptr, "test");
    for (uint64_t p = 0; p < 8; ++p)
        s.markInstalled(p);
    s.markEvicted(7); // evicted with its content saved
    s.setSaved(7);
    std::vector<uint64_t> dropped;
    auto drop = [&](uint64_t p) { dropped.push_back(p); };
    // Pages 1..6 fully covered, 0 and 7 only partly.
    EXPECT_EQ(s.release(kPg - 1, 6 * kPg + 2, drop), 6);
    EXPECT_TRUE(s.mustSave(0));
    for (uint64_t p = 1; p <= 6; ++p)
        EXPECT_FALSE(s.mustSave(p)) << "page " << p;
    EXPECT_TRUE(dropped.empty());
    // Released when not present: its saved copy goes.
    EXPECT_EQ(s.release(7 * kPg, kPg, drop), 1);
    EXPECT_EQ(dropped, (std::vector<uint64_t>{7}));
    EXPECT_FALSE(s.saved(7));

    s.markReferenced(2 * kPg, 1); // a fast-path writer
    s.protect(3 * kPg, 1);        // a posted buffer
    s.newContent(4);              // the pager's patch
    for (uint64_t p : {2, 3, 4})
        EXPECT_TRUE(s.mustSave(p)) << "page " << p << ": new content ends the release";
    EXPECT_FALSE(s.mustSave(5));
    s.markEvicted(5);
    s.markInstalled(5);
    EXPECT_TRUE(s.mustSave(5)) << "an evicted page comes back not released";
    EXPECT_EQ(s.release(0, 0, drop), 0);
}

TEST(PageState, ReleasedPiecesOfAHugePageAddUpToAWholePage)
{
    PageState s(4 * kHuge, kHugeShift, nullptr, "test");
    for (uint64_t p = 0; p < 3; ++p)
        s.markInstalled(p);
    std::vector<uint64_t> dropped;
    auto drop = [&](uint64_t p) { dropped.push_back(p); };
    // Pages 0 and 1 released in 64 KiB steps: each counts once its last piece goes.
    for (uint64_t off = 0; off < 2 * kHuge; off += 64 << 10) {
        const bool last = (off + (64 << 10)) % kHuge == 0;
        EXPECT_EQ(s.release(off, 64 << 10, drop), last ? 1 : 0) << "offset " << off;
        EXPECT_EQ(s.mustSave(off / kHuge), !last) << "offset " << off;
    }
    // A write into one 4 KiB piece takes that piece's mark away, wherever it
    // comes from: the page is saved after all.
    s.markReferenced(kHuge + 3 * kPg + 10, 100);
    EXPECT_FALSE(s.mustSave(0));
    EXPECT_TRUE(s.mustSave(1));
    // Releasing that piece again makes the page whole again.
    EXPECT_EQ(s.release(kHuge + 3 * kPg, kPg, drop), 1);
    EXPECT_FALSE(s.mustSave(1));
    s.unrelease(kHuge + 511 * kPg, 1); // the pager's patch into the last piece
    EXPECT_TRUE(s.mustSave(1));
    EXPECT_EQ(s.release(kHuge + 511 * kPg + 1, kPg - 1, drop), 0) << "not a whole piece";
    EXPECT_TRUE(s.mustSave(1));

    // Page 2: all but the first piece, in one call; then the first piece.
    EXPECT_EQ(s.release(2 * kHuge + kPg, kHuge - kPg, drop), 0);
    EXPECT_TRUE(s.mustSave(2));
    EXPECT_EQ(s.release(2 * kHuge, kPg, drop), 1);
    EXPECT_FALSE(s.mustSave(2));
    // Evicted, it comes back with no piece released.
    s.markEvicted(2);
    s.markInstalled(2);
    EXPECT_TRUE(s.mustSave(2));
    EXPECT_EQ(s.release(2 * kHuge + kPg, kHuge - kPg, drop), 0);

    // Page 3 is not present but saved: its last piece drops the saved copy.
    s.setSaved(3);
    EXPECT_EQ(s.release(3 * kHuge, kHuge - kPg, drop), 0);
    EXPECT_TRUE(dropped.empty());
    EXPECT_EQ(s.release(4 * kHuge - kPg, kPg, drop), 1);
    EXPECT_EQ(dropped, (std::vector<uint64_t>{3}));
    EXPECT_FALSE(s.saved(3));
}

} // namespace
} // namespace npf::test
