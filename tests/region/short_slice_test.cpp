// shortSlice (sys/thread.h): the pager's time slice. On a kernel with EEVDF
// custom slices (Linux 6.12) the thread's sched_runtime reads back as asked;
// a thread of another policy keeps its own.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <thread>

#include "sys/thread.h"

namespace npf::test {
namespace {

struct Attr { // struct sched_attr, first version
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

Attr attrOf()
{
    Attr a{};
    EXPECT_EQ(::syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0), 0);
    return a;
}

bool kernelAtLeast(int major, int minor)
{
    utsname u{};
    int ma = 0, mi = 0;
    return ::uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &ma, &mi) == 2 &&
           (ma > major || (ma == major && mi >= minor));
}

TEST(ShortSlice, ANormalThreadGetsTheSliceItAsksFor)
{
    if (!kernelAtLeast(6, 12))
        GTEST_SKIP() << "custom slices need Linux 6.12";
    std::thread t([] {
        EXPECT_TRUE(shortSlice(100'000));
        const Attr a = attrOf();
        EXPECT_EQ(a.policy, uint32_t(SCHED_OTHER));
        EXPECT_EQ(a.runtime, 100'000u);
    });
    t.join();
}

TEST(ShortSlice, AnIdleThreadKeepsItsPolicy)
{
    std::thread t([] {
        sched_param p{};
        ASSERT_EQ(::sched_setscheduler(0, SCHED_IDLE, &p), 0);
        EXPECT_FALSE(shortSlice(100'000));
        EXPECT_EQ(::sched_getscheduler(0), SCHED_IDLE);
    });
    t.join();
}

} // namespace
} // namespace npf::test
