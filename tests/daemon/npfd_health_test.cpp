// npfd's probes (userspace/daemon/health.h; docs/cli.md, "npfd") on a real
// npfd serving a veth in fresh namespaces, asked over HTTP inside the rx
// namespace: /healthz and /readyz answer 200 on --health's port and beside
// /metrics; /readyz says 503, naming what, once what npfd set up no longer
// serves (its program detached, its socket file removed, its interface
// deleted: then npfd exits and nothing answers 200 again); /healthz says
// 503, naming the loop, while a loop of npfd's is stuck -- one thread of
// npfd stopped by ptrace, the others running, as a system call that never
// returns would leave it -- and 200 again once it runs on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <iostream>

#include "engine_fixture.h"
#include "http_client.h"
#include "metrics_scrape.h"
#include "npf/client.h"
#include "npfd_rig.h"
#include "thread_freeze.h"
#include "wait.h"

namespace npf::e2e {
namespace {

using test::HttpReply;

class NpfdHealth : public EngineE2E {};

// npfd with --health and --metrics on free ports of the rx namespace (and
// `more` arguments).
struct Probed {
    explicit Probed(std::vector<std::string> more = {})
        : hport(freePort(rig)), mport(freePort(rig)), npfd(rig, dir, args(std::move(more)))
    {
    }
    std::vector<std::string> args(std::vector<std::string> more) const
    {
        more.insert(more.end(), {"--health", "127.0.0.1:" + std::to_string(hport), "--metrics",
                                 "127.0.0.1:" + std::to_string(mport)});
        return more;
    }
    HttpReply get(const std::string& path, uint16_t port = 0)
    {
        return httpExchange(rig, port ? port : hport, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
    }
    // Asks `path` until it answers `status` (true) or the deadline passes
    // (false); *last is the last reply.
    bool await(const std::string& path, int status, HttpReply* last)
    {
        return test::waitUntil([&] { return (*last = get(path)).status == status; }, test::kDeadline,
                               std::chrono::milliseconds(10));
    }
    Rig rig;
    TempDir dir;
    const uint16_t hport, mport;
    Npfd npfd;
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(NpfdHealth, AliveAndReadyOnItsPortAndBesideTheMetrics)
{
    Probed p;
    const std::string ready = "ready: serving " + p.rig.rxIf() + " on " + p.npfd.socket() + "\n";
    for (uint16_t port : {p.hport, p.mport}) {
        const HttpReply alive = p.get("/healthz", port), served = p.get("/readyz", port);
        EXPECT_EQ(alive.status, 200) << alive.error << alive.body;
        EXPECT_EQ(alive.body, "alive\n");
        EXPECT_EQ(alive.header("Content-Type"), "text/plain; charset=utf-8");
        EXPECT_EQ(served.status, 200) << served.error << served.body;
        EXPECT_EQ(served.body, ready);
    }
    const HttpReply head = httpExchange(p.rig, p.hport, "HEAD /readyz HTTP/1.1\r\n\r\n");
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.body, "");
    const HttpReply metrics = p.get("/metrics");
    EXPECT_EQ(metrics.status, 404) << "--health serves the probes alone";
    EXPECT_EQ(metrics.body, "only /healthz, /readyz here\n");
    EXPECT_EQ(p.get("/metrics", p.mport).status, 200);
}

TEST_F(NpfdHealth, NotReadyOnceItsProgramIsDetached)
{
    Probed p;
    HttpReply r;
    ASSERT_TRUE(p.await("/readyz", 200, &r)) << r.status << " " << r.body;
    ASSERT_EQ(test::sh(p.rig.veth().rxNs().exec() + "ip link set dev " + p.rig.rxIf() + " xdp off"), 0);
    ASSERT_TRUE(p.await("/readyz", 503, &r)) << r.status << " " << r.body;
    EXPECT_TRUE(has(r.body, "not ready: " + p.rig.rxIf() + ": npf_xdp (prog id ")) << r.body;
    EXPECT_TRUE(has(r.body, "is no longer attached")) << r.body;
    EXPECT_EQ(p.get("/healthz").status, 200) << "alive: a restart is not what cures this";
}

TEST_F(NpfdHealth, NotReadyOnceItsSocketFileIsRemoved)
{
    Probed p;
    HttpReply r;
    ASSERT_TRUE(p.await("/readyz", 200, &r)) << r.status << " " << r.body;
    ASSERT_EQ(::unlink(p.npfd.socket().c_str()), 0);
    ASSERT_TRUE(p.await("/readyz", 503, &r)) << r.status << " " << r.body;
    EXPECT_TRUE(has(r.body, "the socket " + p.npfd.socket() + " is gone")) << r.body;
    EXPECT_EQ(p.get("/healthz").status, 200);
}

// npfd stops serving a deleted interface and exits 4; from the moment /readyz
// stops saying 200 it never says it again: 503 naming the interface, then
// nothing (npfd is gone).
TEST_F(NpfdHealth, NeverReadyAgainOnceItsInterfaceIsDeleted)
{
    Probed p;
    HttpReply r;
    ASSERT_TRUE(p.await("/readyz", 200, &r)) << r.status << " " << r.body;
    ASSERT_EQ(test::sh(p.rig.veth().rxNs().exec() + "ip link del " + p.rig.rxIf()), 0);
    std::vector<HttpReply> after;
    int st = -1;
    const bool exited = test::waitUntil(
        [&] {
            if (p.npfd.wait(0, &st))
                return true;
            r = p.get("/readyz");
            if (r.status != 200 || !after.empty())
                after.push_back(r);
            return false;
        },
        test::kDeadline, std::chrono::milliseconds(10));
    ASSERT_TRUE(exited) << "npfd did not stop serving a deleted interface\n" << p.npfd.log();
    EXPECT_EQ(st, 4) << "exit 4 (no such interface), not 0: a supervisor restarts it\n" << p.npfd.log();
    EXPECT_EQ(p.get("/readyz").status, 0) << "npfd is gone";
    size_t notReady = 0;
    for (const HttpReply& a : after)
        notReady += a.status == 503;
    std::cout << "/readyz after the deletion, until npfd exited (status " << st << "): " << notReady << " x 503, "
              << after.size() - notReady << " x no answer\n";

    for (const HttpReply& a : after) {
        EXPECT_NE(a.status, 200) << "ready again after it was not";
        if (a.status == 503) {
            EXPECT_TRUE(has(a.body, "not ready: " + p.rig.rxIf() + ": ")) << a.body;
            EXPECT_TRUE(has(a.body, " is gone")) << a.body;
        }
    }
}

// One stuck loop of npfd fails /healthz (and /readyz), naming it; the probes'
// own server and npfd's other threads run on. Stall limit 1 s.
TEST_F(NpfdHealth, NotAliveWhileALoopIsStuck)
{
    Probed p({"--health-stall-ms", "1000"});
    const std::string ifname = p.rig.rxIf();
    const struct {
        const char* thread;
        std::string named;
    } loops[] = {
        {nullptr, "control loop: no progress for "}, // npfd's main thread
        {"npf-worker-0", ifname + " npf-worker-0: no progress for "},
        {"npf-pager", ifname + " npf-pager: no progress for "},
    };
    for (const auto& l : loops) {
        SCOPED_TRACE(l.named);
        HttpReply r;
        ASSERT_TRUE(p.await("/healthz", 200, &r)) << r.status << " " << r.body;
        {
            const pid_t tid = l.thread ? test::threadNamed(p.npfd.pid(), l.thread) : p.npfd.pid();
            test::ThreadFreeze frozen(p.npfd.pid(), tid);
            ASSERT_TRUE(p.await("/healthz", 503, &r)) << r.status << " " << r.body;
            EXPECT_TRUE(has(r.body, "stalled: " + l.named)) << r.body;
            EXPECT_TRUE(has(r.body, "(stall limit 1.0 s)")) << r.body;
            const HttpReply ready = p.get("/readyz");
            EXPECT_EQ(ready.status, 503);
            EXPECT_TRUE(has(ready.body, "not ready: stalled: ")) << ready.body;
            EXPECT_EQ(p.get("/metrics", p.mport).status, 200) << "the scrape does not wait on a loop that holds no lock";
        }
        ASSERT_TRUE(p.await("/healthz", 200, &r)) << "it runs on: " << r.status << " " << r.body;
    }
    // And it still serves.
    Client cli({.socket = p.npfd.socket(), .regionSize = 1 << 20, .name = "after"});
    EXPECT_NO_THROW((void)cli.openFlow(kFirstPort));
}

} // namespace
} // namespace npf::e2e
