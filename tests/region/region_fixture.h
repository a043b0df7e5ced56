// Helpers for region tests: uffd availability skip, a pager thread that
// serves CPU faults, deterministic content, memfd allocation.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "region/region.h"

#define NPF_REQUIRE_UFFD()                                                   \
    do {                                                                     \
        std::string why_;                                                    \
        if (!::npf::userfaultfdAvailable(&why_))                             \
            GTEST_SKIP() << "userfaultfd unavailable: " << why_;             \
    } while (0)

// `pool`: a topology::HugePages (tools/topology/huge_pages.h).
#define NPF_REQUIRE_HUGE_PAGES(pool)                                         \
    do {                                                                     \
        NPF_REQUIRE_UFFD();                                                  \
        if (!(pool).ok())                                                    \
            GTEST_SKIP() << "2 MiB huge pages unavailable: " << (pool).why(); \
    } while (0)

namespace npf::test {

constexpr uint64_t kPg = NPF_PAGE_SIZE;

// Polls the region's uffd (and its client's, if any) and serves faults until
// destroyed.
class PagerThread {
public:
    explicit PagerThread(Region& r) : r_(r), t_([this] { run(); }) {}
    ~PagerThread()
    {
        stop_ = true;
        t_.join();
    }
    PagerThread(const PagerThread&) = delete;
    PagerThread& operator=(const PagerThread&) = delete;
    uint64_t maxResident() const { return maxResident_.load(); }
    // Waits until the loop has finished the work it was doing: UFFDIO_COPY
    // wakes the faulting thread before the pager's bookkeeping is done.
    void sync() const
    {
        uint64_t start = loops_.load();
        while (loops_.load() < start + 2)
            std::this_thread::yield();
    }

private:
    void run()
    {
        int client = r_.clientUffdFd();
        while (!stop_) {
            pollfd p[2] = {{r_.uffdFd(), POLLIN, 0}, {client, POLLIN, 0}};
            if (::poll(p, 2, 2) > 0) {
                if (p[0].revents) {
                    int rc = r_.serviceFaults();
                    EXPECT_GE(rc, 0) << "serviceFaults: " << rc;
                }
                if (p[1].revents) {
                    int rc = r_.serviceClientFaults();
                    if (rc == -ENOTCONN)
                        client = -1; // gone: stop polling its uffd
                    else
                        EXPECT_GE(rc, 0) << "serviceClientFaults: " << rc;
                }
            }
            uint64_t res = r_.residentPages();
            if (res > maxResident_)
                maxResident_ = res;
            loops_.fetch_add(1);
        }
    }
    Region& r_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> maxResident_{0};
    std::atomic<uint64_t> loops_{0};
    std::thread t_;
};

inline std::vector<uint8_t> randomBytes(size_t n, uint32_t seed)
{
    std::mt19937 g(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v)
        b = static_cast<uint8_t>(g());
    return v;
}

// Bytes the memfd really holds (st_blocks), i.e. pages present in shmem.
inline uint64_t memfdBytes(const Region& r)
{
    struct stat st{};
    EXPECT_EQ(::fstat(r.memfd(), &st), 0);
    return static_cast<uint64_t>(st.st_blocks) * 512;
}

inline bool allZero(const uint8_t* p, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (p[i])
            return false;
    return true;
}

inline RegionConfig smallConfig(uint64_t size = 64ull << 20)
{
    RegionConfig c;
    c.size = size;
    c.name = "npf-test-region";
    return c;
}

// `c` (smallConfig() by default) whose fast-path writers enter `epochs` (RegionConfig::epochs).
inline RegionConfig withEpochs(EpochDomain& epochs, RegionConfig c = smallConfig())
{
    c.epochs = &epochs;
    return c;
}

// Where the region under test keeps its pages: its memfd, or private
// anonymous memory, pages copied in or moved in from a page pool
// (RegionConfig::backing).
enum class Memory { Memfd, Anonymous, Pool };

inline std::string memoryName(const ::testing::TestParamInfo<Memory>& i)
{
    return i.param == Memory::Pool ? "Pool" : i.param == Memory::Anonymous ? "Anonymous" : "Memfd";
}

// Tests that run once per kind of memory.
class RegionOn : public ::testing::TestWithParam<Memory> {
protected:
    static RegionConfig config(uint64_t size = 64ull << 20)
    {
        RegionConfig c = smallConfig(size);
        c.backing = GetParam() == Memory::Pool        ? RegionBacking::Pool
                    : GetParam() == Memory::Anonymous ? RegionBacking::Anonymous
                                                      : RegionBacking::Memfd;
        return c;
    }
};

#define NPF_ON_EACH_MEMORY(suite) \
    INSTANTIATE_TEST_SUITE_P(Memory, suite, ::testing::Values(Memory::Memfd, Memory::Anonymous, Memory::Pool), memoryName)

// Bytes of the region's pages present in its mapping now (mincore): what it
// holds, memfd or anonymous memory alike.
inline uint64_t heldBytes(const Region& r)
{
    std::vector<unsigned char> v((r.size() + kPg - 1) / kPg);
    EXPECT_EQ(::mincore(r.base(), r.size(), v.data()), 0) << std::strerror(errno);
    uint64_t n = 0;
    for (unsigned char c : v)
        n += c & 1;
    return n * kPg;
}

} // namespace npf::test
