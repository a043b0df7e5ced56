// npfd's memory check at start (userspace/daemon/memory_limit.h) in a real
// memory cgroup (v2 where this machine's unified hierarchy carries memory,
// else v1's): on a 4-queue veth with a 96 MiB limit, all four queues (4 x
// 16 MiB of UMEM and rings, plus the 64 MiB headroom) do not fit: npfd
// refuses before it touches the interface, naming the numbers, the limit's
// file and `--queues 1`, and exits 6 -- not killed by the OOM killer. With
// --queues 1, the same npfd in the same cgroup starts and serves.
#include <gtest/gtest.h>

#include "cli/exit_codes.h"
#include "engine_fixture.h"
#include "http_client.h"
#include "memory_cgroup.h"
#include "metrics_scrape.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

constexpr uint64_t kLimit = 96ull << 20;

class NpfdMemoryLimit : public EngineE2E {};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(NpfdMemoryLimit, RefusesQueuesThatDoNotFitItsCgroupAndServesThoseThatDo)
{
    std::optional<test::MemoryCgroup> cg = test::MemoryCgroup::create(kLimit);
    if (!cg)
        GTEST_SKIP() << "no cgroup hierarchy here carries the memory controller";
    Rig rig(test::VethOptions{.queues = 4});
    TempDir dir;
    {
        std::vector<std::string> argv = cg->wrapper();
        argv.insert(argv.end(), {NPFD_PATH, "--iface", rig.rxIf(), "--socket", dir.path + "/npfd.sock"});
        Child npfd(rig.veth().rxNs().path(), argv, dir.path + "/refused.log");
        int st = -1;
        ASSERT_TRUE(npfd.wait(int(test::kDeadline.count()), &st)) << "npfd did not exit";
        const std::string log = readFile(dir.path + "/refused.log");
        EXPECT_EQ(st, cli::kExitMemoryLimit) << "(137: the OOM killer)\n" << log;
        for (const std::string& part : std::vector<std::string>{"4 RX queues of " + rig.rxIf(), "MTU 1500", "96.0 MiB",
                                                                cg->limitFile(), "--queues 1 fits", "raise the limit"})
            EXPECT_TRUE(has(log, part)) << part << " in:\n" << log;
    }
    EXPECT_FALSE(has(test::shOut(rig.veth().rxNs().exec() + "ip link show dev " + rig.rxIf()), "xdp"))
        << "npfd refused before it attached anything";

    const uint16_t hport = freePort(rig);
    Npfd npfd(rig, dir,
              NpfdOptions{.extraArgs = {"--queues", "1", "--health", "127.0.0.1:" + std::to_string(hport)},
                          .wrapper = cg->wrapper()});
    const std::string log = npfd.log();
    EXPECT_TRUE(has(log, "memory limit: 96.0 MiB (" + cg->limitFile() + ")")) << log;
    EXPECT_TRUE(has(log, "serving RX queues 0..0 of 4")) << "the unserved queues are named\n" << log;
    const test::HttpReply ready = httpExchange(rig, hport, "GET /readyz HTTP/1.1\r\n\r\n");
    EXPECT_EQ(ready.status, 200) << ready.body << ready.error;
    EXPECT_EQ(npfd.stop(), 0) << "npfd ran within its limit and stopped cleanly\n" << npfd.log();
}

} // namespace
} // namespace npf::e2e
