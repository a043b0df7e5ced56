// The post ring's views: the application's PostProducer, the engine's
// PostReader, over memory shared like the BPF maps are (here an anonymous
// shared mapping, also across fork()). No root.
#include "dataplane/post_ring.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

namespace npf::dataplane {
namespace {

// One flow's slots and cursor in MAP_SHARED memory.
struct Shared {
    Shared()
    {
        mem = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            throw std::runtime_error("mmap");
        cursor = static_cast<npf_cursor*>(mem);
        polled = reinterpret_cast<uint64_t*>(static_cast<char*>(mem) + 2048);
        posts = reinterpret_cast<npf_post*>(static_cast<char*>(mem) + 4096);
    }
    ~Shared() { ::munmap(mem, kBytes); }
    static constexpr size_t kBytes = 4096 + NPF_POST_RING_SIZE * sizeof(npf_post);
    void* mem;
    npf_cursor* cursor;
    uint64_t* polled; // the application's "completed and polled" count (the engine's reuse rule)
    npf_post* posts;
};

// What XDP does: claim the next published post.
bool claim(npf_cursor* c, uint64_t* seq)
{
    std::atomic_ref<__u64> cons(c->cons);
    __u64 cur = cons.load(std::memory_order_acquire);
    if (cur >= std::atomic_ref<__u64>(c->prod).load(std::memory_order_acquire))
        return false;
    if (!cons.compare_exchange_strong(cur, cur + 1, std::memory_order_acq_rel))
        return false;
    *seq = cur;
    return true;
}

TEST(PostRing, ProducerStartsAtConsAndPublishesInBursts)
{
    Shared m;
    m.cursor->cons = 100;
    m.cursor->prod = 140; // posts a dead producer left
    PostProducer p(m.posts, m.cursor);
    PostReader r(m.posts, m.cursor);
    EXPECT_EQ(p.start(), 100u);
    EXPECT_EQ(r.published(), 100u) << "stale posts are discarded";
    p.post(4096, 1500);
    p.post(8192, 1500);
    EXPECT_EQ(r.published(), 100u) << "not visible before publish()";
    EXPECT_EQ(m.cursor->flags & NPF_CURSOR_F_SERVED, 0u);
    EXPECT_EQ(p.unpublished(), 2u);
    EXPECT_TRUE(p.publish());
    EXPECT_FALSE(p.publish()) << "nothing new";
    EXPECT_EQ(r.published(), 102u);
    EXPECT_NE(m.cursor->flags & NPF_CURSOR_F_SERVED, 0u) << "served with the first publish";
    EXPECT_EQ(r.slot(100).offset, 4096u);
    EXPECT_EQ(r.slot(101).offset, 8192u);
    EXPECT_EQ(r.slot(101).len, 1500u);
    EXPECT_EQ(r.slots().at(101 + NPF_POST_RING_SIZE).offset, 8192u) << "slot = seq mod ring size";
}

TEST(PostRing, WithdrawUnservesAndDiscards)
{
    Shared m;
    m.cursor->flags = NPF_CURSOR_F_ENGINE;
    PostProducer p(m.posts, m.cursor);
    for (int i = 0; i < 10; i++)
        p.post(uint64_t(i) * 4096, 100);
    p.publish();
    uint64_t seq;
    ASSERT_TRUE(claim(m.cursor, &seq));
    PostProducer::withdraw(m.cursor);
    EXPECT_EQ(m.cursor->prod, 1u);
    EXPECT_EQ(m.cursor->cons, 1u);
    EXPECT_EQ(m.cursor->flags, uint32_t(NPF_CURSOR_F_ENGINE)) << "only SERVED is cleared";
    EXPECT_FALSE(claim(m.cursor, &seq));
}

// The producer in another process: every post the consumer claims carries
// what the producer wrote for that seq, across many laps of the ring.
TEST(PostRing, ProducerInAnotherProcess)
{
    Shared m;
    constexpr uint64_t kPosts = 200'000;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        PostProducer p(m.posts, m.cursor);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (uint64_t s = 0; s < kPosts; s++) {
            // A slot is reused only once its seq was completed and polled.
            while (s - std::atomic_ref<uint64_t>(*m.polled).load(std::memory_order_acquire) >= NPF_POST_RING_SIZE) {
                p.publish();
                if (std::chrono::steady_clock::now() > deadline)
                    ::_exit(2);
            }
            p.post(s * 64, static_cast<uint32_t>(s % 9000 + 1));
            if (p.unpublished() >= 16)
                p.publish();
        }
        p.publish();
        ::_exit(0);
    }
    PostReader r(m.posts, m.cursor);
    uint64_t got = 0, bad = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (got < kPosts && std::chrono::steady_clock::now() < deadline) {
        uint64_t seq;
        if (!claim(m.cursor, &seq))
            continue;
        const Post p = r.slot(seq);
        bad += p.offset != seq * 64 || p.len != seq % 9000 + 1;
        got++;
        std::atomic_ref<uint64_t>(*m.polled).store(got, std::memory_order_release);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(got, kPosts);
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(r.consumed(), kPosts);
}

} // namespace
} // namespace npf::dataplane
