// What a release npfd applies late may still discard (late_release.h): the
// range minus the pages of the buffers the client posted since, on post
// rings in plain memory (no npfd, no root).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "daemon/late_release.h"

namespace npf::daemon {
namespace {

constexpr uint64_t kPg = NPF_PAGE_SIZE;

// A flow's post ring with `n` posts published, post i at posts[i].
struct Ring {
    npf_ring ring{};
    void post(std::vector<std::pair<uint64_t, uint32_t>> posts, uint64_t first = 0)
    {
        for (uint64_t i = 0; i < posts.size(); i++)
            ring.posts[(first + i) % NPF_POST_RING_SIZE] = {posts[i].first, posts[i].second, 0};
        ring.cursor.prod = first + posts.size();
    }
    dataplane::PostReader reader() const { return {ring.posts, &ring.cursor}; }
};

TEST(LateRelease, NothingPostedSinceReleasesTheWholeRange)
{
    Ring r;
    r.post({{0, 4096}, {4096, 4096}});
    const PostsSince since[] = {{r.reader(), 2}};
    EXPECT_EQ(lateRelease(0, 8 * kPg, since), (std::vector<ByteRange>{{0, 8 * kPg}}));
    EXPECT_EQ(lateRelease(0, 8 * kPg, {}), (std::vector<ByteRange>{{0, 8 * kPg}})) << "no `posted`: an older client";
}

TEST(LateRelease, BuffersPostedSinceAreLeftOutPageByPage)
{
    Ring a, b;
    // Since the release: a 1000-byte buffer inside page 2, one spanning
    // pages 5 and 6, one outside the range; and on another flow page 0.
    a.post({{99 * kPg, 100}, {2 * kPg + 100, 1000}, {5 * kPg + 4000, 200}, {40 * kPg, 4096}});
    b.post({{0, 10}});
    const PostsSince since[] = {{a.reader(), 1}, {b.reader(), 0}};
    EXPECT_EQ(lateRelease(0, 8 * kPg, since),
              (std::vector<ByteRange>{{kPg, kPg}, {3 * kPg, 2 * kPg}, {7 * kPg, kPg}}));
    // The range need not start on a page: the parts keep its ends.
    EXPECT_EQ(lateRelease(kPg + 10, 2 * kPg, since),
              (std::vector<ByteRange>{{kPg + 10, kPg - 10}, {3 * kPg, 10}}));
}

TEST(LateRelease, OverlappingPostsInAnyOrder)
{
    Ring a;
    a.post({{6 * kPg, 3 * kPg}, {kPg, kPg}, {7 * kPg, kPg}, {kPg + 5, 3}});
    const PostsSince since[] = {{a.reader(), 0}};
    EXPECT_EQ(lateRelease(0, 10 * kPg, since), (std::vector<ByteRange>{{0, kPg}, {2 * kPg, 4 * kPg}, {9 * kPg, kPg}}));
}

TEST(LateRelease, MoreThanARingSinceReleasesNothing)
{
    Ring a;
    a.post({{0, 1}}, NPF_POST_RING_SIZE); // prod = ring size + 1
    const PostsSince since[] = {{a.reader(), 0}};
    EXPECT_EQ(lateRelease(0, 8 * kPg, since), std::nullopt) << "which buffers were posted is overwritten";
    const PostsSince within[] = {{a.reader(), 1}};
    EXPECT_EQ(lateRelease(kPg, kPg, within), (std::vector<ByteRange>{{kPg, kPg}}));
}

TEST(LateRelease, AClientsWrongWordsHarmOnlyItsOwnRange)
{
    Ring a;
    a.post({{UINT64_MAX - 10, 4096}, {UINT64_MAX, UINT32_MAX}});
    // from ahead of prod: nothing left out.
    const PostsSince ahead[] = {{a.reader(), 1000}};
    EXPECT_EQ(lateRelease(0, 4 * kPg, ahead), (std::vector<ByteRange>{{0, 4 * kPg}}));
    // Posts at the end of the address space: no overflow, they lie outside.
    const PostsSince wild[] = {{a.reader(), 0}};
    EXPECT_EQ(lateRelease(0, 4 * kPg, wild), (std::vector<ByteRange>{{0, 4 * kPg}}));
}

} // namespace
} // namespace npf::daemon
