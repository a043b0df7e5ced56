// npfd's memory check at start, its parts without the kernel: reading the
// cgroup files' text (mountinfo, /proc/self/cgroup, limit values) and the
// decision with its message (daemon/memory_limit.h, cgroup_memory.h). A
// real npfd in a real memory cgroup is npfd_memory_limit_test.cpp. No root.
#include <gtest/gtest.h>

#include "daemon/cgroup_memory.h"
#include "daemon/memory_limit.h"
#include "xsk/sizing.h"

namespace npf::daemon {
namespace {

// This machine's hybrid layout: v1 controllers, a v2 hierarchy without memory.
const char* kHybrid =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
// A container's: the unified hierarchy only, its own cgroup at the top (an
// optional field before the separator, and an escaped space).
const char* kContainer = "1029 1020 0:26 / /sys/fs/cgroup ro,nosuid master:9 - cgroup2 cgroup rw\n"
                         "1030 1020 0:60 / /run/my\\040dir rw - tmpfs tmpfs rw\n";
// An old docker's: v1, the container's cgroup bind-mounted at the top.
const char* kDockerV1 =
    "600 590 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n";

TEST(CgroupMemory, MountsThatCanCarryTheMemoryController)
{
    std::vector<CgroupMount> m = parseCgroupMounts(kHybrid);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_FALSE(m[0].v2);
    EXPECT_EQ(m[0].point, "/sys/fs/cgroup/memory");
    EXPECT_TRUE(m[1].v2);
    EXPECT_EQ(m[1].point, "/sys/fs/cgroup/unified");
    m = parseCgroupMounts(kContainer);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_TRUE(m[0].v2);
    EXPECT_EQ(m[0].root, "/");
    m = parseCgroupMounts(kDockerV1);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].root, "/docker/abc");
    EXPECT_TRUE(parseCgroupMounts("garbage\n\n1 2 3\n").empty());
}

TEST(CgroupMemory, ProcCgroupLines)
{
    ProcCgroups c = parseProcCgroup("9:name=systemd:/\n4:memory:/process_api/6345\n1:cpu:/\n0::/\n");
    EXPECT_EQ(c.v1Memory, "/process_api/6345");
    EXPECT_EQ(c.v2, "/");
    c = parseProcCgroup("0::/kubepods.slice/pod:1/npfd\n");
    EXPECT_EQ(c.v2, "/kubepods.slice/pod:1/npfd") << "a path may contain ':'";
    EXPECT_EQ(c.v1Memory, "");
    EXPECT_EQ(parseProcCgroup("5:cpu,memory:/a\n").v1Memory, "/a");
}

TEST(CgroupMemory, LimitValues)
{
    EXPECT_EQ(parseMemoryLimit("536870912\n"), 536870912u);
    EXPECT_EQ(parseMemoryLimit("max\n"), std::nullopt);
    EXPECT_EQ(parseMemoryLimit("9223372036854771712\n"), std::nullopt) << "v1's unlimited";
    EXPECT_EQ(parseMemoryLimit(""), std::nullopt) << "no such file";
    EXPECT_EQ(parseMemoryLimit("12k"), std::nullopt);
}

TEST(CgroupMemory, TheLevelsWhoseLimitsBind)
{
    const CgroupMount top{true, "/", "/sys/fs/cgroup"};
    EXPECT_EQ(limitDirs(top, "/kubepods/pod1/npfd"),
              (std::vector<std::string>{"/sys/fs/cgroup/kubepods/pod1/npfd", "/sys/fs/cgroup/kubepods/pod1",
                                        "/sys/fs/cgroup/kubepods", "/sys/fs/cgroup"}));
    EXPECT_EQ(limitDirs(top, "/"), std::vector<std::string>{"/sys/fs/cgroup"});
    const CgroupMount docker{false, "/docker/abc", "/sys/fs/cgroup/memory"};
    EXPECT_EQ(limitDirs(docker, "/docker/abc"), std::vector<std::string>{"/sys/fs/cgroup/memory"});
    EXPECT_EQ(limitDirs(docker, "/docker/abc/x"),
              (std::vector<std::string>{"/sys/fs/cgroup/memory/x", "/sys/fs/cgroup/memory"}));
    EXPECT_TRUE(limitDirs(docker, "/docker/abcd").empty()) << "not below the mount's root";
    EXPECT_TRUE(limitDirs(top, "").empty());
}

// What the check decides, on a plan of a 32-queue NIC at MTU 1500.
std::vector<IfaceMemory> plan(uint32_t queues, uint32_t available)
{
    QueuePlan p;
    p.queues = queues;
    p.available = available;
    p.mtu = 1500;
    p.sizes = xsk::queueSizes(1500, NPF_POST_RING_SIZE, 0, 0, 0);
    p.perQueue = xsk::queueMemory(p.sizes);
    return {{"eth0", "eth0", p}};
}

TEST(MemoryLimit, AQueuePinsItsUmemAndRings)
{
    const std::vector<IfaceMemory> p = plan(1, 1);
    EXPECT_EQ(uint64_t(p[0].plan.sizes.frameSize) * p[0].plan.sizes.frameCount, 16u << 20) << "MTU 1500";
    EXPECT_GT(p[0].plan.perQueue, 16u << 20);
    EXPECT_LT(p[0].plan.perQueue, 17u << 20);
}

TEST(MemoryLimit, RefusesWhatDoesNotFitNamingTheNumbersAndTheFix)
{
    const std::optional<MemoryLimit> limit = MemoryLimit{512u << 20, "/sys/fs/cgroup/npfd/memory.max"};
    try {
        checkMemoryLimit(plan(32, 32), limit);
        FAIL() << "32 queues in 512 MiB";
    } catch (const MemoryLimitError& e) {
        const std::string what = e.what();
        EXPECT_EQ(e.code().value(), ENOMEM);
        for (const char* part : {"32 RX queues of eth0", "MTU 1500", "512.0 MiB", "/sys/fs/cgroup/npfd/memory.max",
                                 "--queues 27 fits", "raise the limit to at least"})
            EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
    }
    EXPECT_NO_THROW(checkMemoryLimit(plan(27, 32), limit)) << "what it suggested fits";
    EXPECT_NO_THROW(checkMemoryLimit(plan(32, 32), std::nullopt)) << "no limit";
    try {
        checkMemoryLimit(plan(1, 32), MemoryLimit{64u << 20, "f"});
        FAIL() << "not even the headroom fits";
    } catch (const MemoryLimitError& e) {
        EXPECT_NE(std::string(e.what()).find("not even --queues 1 fits"), std::string::npos) << e.what();
    }
}

} // namespace
} // namespace npf::daemon
