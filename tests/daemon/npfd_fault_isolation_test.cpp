// npfd's threads never wait, without bound, on a fault only another of them
// can serve (root; the rig's namespaces). Two shapes that froze npfd for
// every tenant, with no attack on a descriptor:
//
//   - 4 KiB: a client punches holes in its own region memfd, at pages npfd
//     believes resident, and receives into them again: the worker's store
//     into npfd's mapping of a punched page faults;
//   - 2 MiB: an honest client whose own thread installs its huge pages
//     (libnpf's install area): the worker's first store to such a page
//     faults too (the page is in the page cache, not in npfd's mapping).
//
// Beside each, an eviction-heavy client (cold, a 1 MiB budget) keeps
// npfd's pager in grace periods that wait for the worker, and a third
// client receives stream after stream byte for byte. npfd must answer a
// hello all along and stop on SIGTERM; the counters must show that the
// path was taken while grace periods waited for the worker, so the test
// cannot pass by never reaching it: 4 KiB, the worker's stores faulted then
// (fast_path_faults_in_grace); 2 MiB, pages the client's thread installed
// (client_installs), which npfd now maps before it sets their resident bits
// (a store that still faults is caught the same way: region_client_test).
//
// Each runs NPF_FAULT_ISOLATION_SECONDS (default 20; the soak is 300).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.h"
#include "hostile_client.h"
#include "huge_pages.h"
#include "npfd_rig.h"

namespace npf::e2e {
namespace {

std::chrono::seconds soakSeconds()
{
    const char* s = std::getenv("NPF_FAULT_ISOLATION_SECONDS");
    const long v = s ? std::strtol(s, nullptr, 10) : 0;
    return std::chrono::seconds(v > 0 ? v : 20);
}

// Failures of the threads, reported by the test's thread.
class Failures {
public:
    void add(const std::string& what)
    {
        std::lock_guard lk(mu_);
        if (list_.size() < 8)
            list_.push_back(what);
        any_ = true;
    }
    bool any() const { return any_.load(); }
    std::string text() const
    {
        std::lock_guard lk(mu_);
        std::string s;
        for (const std::string& w : list_)
            s += w + "\n";
        return s;
    }

private:
    mutable std::mutex mu_;
    std::vector<std::string> list_;
    std::atomic<bool> any_{false};
};

// Three unpaced socat streams run at once here, all through the rig's one RX
// queue: together they must fit its sockets' RX rings (4096 descriptors, a
// post ring's worth), or a pager held up for a few milliseconds on a loaded
// machine overflows the backup ring (socket_dropped) through no fault of
// npfd's. 1024 datagrams each (a CI run lost 788 of 2048 with 2 MiB streams).
constexpr size_t kBesideStream = 1 << 20;
// The eviction-heavy victim's budget: its 1024 datagrams land in 2 KiB
// buffers, 2 MiB of its region, twice this.
const std::string kEvictorBudget = "1M";

// Streams into a fresh victim on `port` until `stop`, each byte for byte.
void streamsUntil(Rig& rig, Npfd& npfd, const TempDir& dir, uint16_t port, uint32_t seed, const std::string& budget,
                  const std::atomic<bool>& stop, Failures& fail, std::atomic<uint64_t>& rounds)
{
    for (uint32_t r = 0; !stop.load() && !fail.any(); r++) {
        Victim v(rig, npfd, dir, port, kBesideStream, seed + r, true, budget);
        auto ok = v.ready();
        if (ok) {
            v.send();
            ok = v.received();
        }
        if (!ok) {
            fail.add("stream " + std::to_string(r) + " to port " + std::to_string(port) + ": " + ok.message());
            return;
        }
        rounds++;
    }
}

// npfd answers a hello every second until `stop` (a frozen npfd is
// SIGKILLed by answersHello: the others then fail fast).
void probeUntil(Npfd& npfd, const std::atomic<bool>& stop, Failures& fail)
{
    while (!stop.load()) {
        if (auto ok = answersHello(npfd); !ok) {
            fail.add(ok.message());
            return;
        }
        for (int i = 0; i < 10 && !stop.load(); i++)
            std::this_thread::sleep_for(100ms);
    }
}

constexpr uint32_t kPunchPages = 256;      // of the puncher's 1 MiB region, a buffer each
constexpr uint32_t kPunchBytes = 1024;     // its datagrams

// The 4 KiB shape's client: receives a datagram into each page of its
// region, checks every byte, punches every page out of its memfd (npfd
// still believes them resident) and starts again, until `stop`.
void punchUntil(Rig& rig, Npfd& npfd, const std::atomic<bool>& stop, Failures& fail, std::atomic<uint64_t>& rounds)
{
    try {
        Hostile h(npfd, "puncher");
        h.region(uint64_t{kPunchPages} * 4096, uint64_t{kPunchPages} * 4096);
        HostileFlow f = h.openFlow(kFirstPort + 1);
        for (uint32_t r = 0; !stop.load() && !fail.any(); r++) {
            const uint64_t first = f.prod;
            for (uint32_t k = 0; k < kPunchPages; k++)
                f.post(uint64_t{k} * 4096, 4096);
            f.publish();
            std::vector<npf_completion> got;
            Sender tx(rig.veth(), {.sender = r & 0xff, .count = kPunchPages, .dstPort = kFirstPort + 1,
                                   .size = [](uint32_t) { return kPunchBytes; }});
            tx.flowControl(64, [&] {
                f.take(got);
                return uint64_t(got.size());
            });
            tx.start();
            tx.join();
            if (!tx.error().empty())
                return fail.add("puncher's sender: " + tx.error());
            if (!test::waitUntil([&] {
                    f.take(got);
                    return got.size() >= kPunchPages;
                }))
                return fail.add("the puncher's round " + std::to_string(r) + " completed " +
                                std::to_string(got.size()) + " of " + std::to_string(kPunchPages) + " datagrams");
            for (const npf_completion& c : got) {
                const std::vector<uint8_t> want = payloadFor(senderId(r & 0xff, uint32_t(c.seq - first)), kPunchBytes);
                if (c.status != NPF_CS_OK || c.len != kPunchBytes ||
                    std::memcmp(h.read(c.offset, c.len).data(), want.data(), kPunchBytes) != 0)
                    return fail.add("the puncher's datagram " + std::to_string(c.seq) + " (status " +
                                    std::to_string(c.status) + ") is not in its buffer");
            }
            if (::fallocate(h.memfd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(h.size)) != 0)
                return fail.add(std::string("punch: ") + std::strerror(errno));
            rounds++;
        }
        if (auto ok = h.leave(); !ok)
            fail.add("the puncher's bye: " + std::string(ok.message()));
    } catch (const std::exception& e) {
        fail.add(std::string("the puncher: ") + e.what());
    }
}

class NpfdFaultIsolation : public EngineE2E {};

// The shape's client runs in `client` (on its own thread) beside the
// eviction-heavy client and the byte-exact one, for soakSeconds().
template <class Client>
void besideEviction(Rig& rig, Npfd& npfd, const TempDir& dir, const char* reached, Client client)
{
    const Counters r0 = rig.regionSnapshot();
    std::atomic<bool> stop{false};
    Failures fail;
    std::atomic<uint64_t> evictorRounds{0}, exactRounds{0}, clientRounds{0};
    std::vector<std::thread> threads;
    threads.emplace_back(
        [&] { streamsUntil(rig, npfd, dir, kVictimPort + 1, 100, kEvictorBudget, stop, fail, evictorRounds); });
    threads.emplace_back([&] { streamsUntil(rig, npfd, dir, kVictimPort + 2, 5000, "2M", stop, fail, exactRounds); });
    threads.emplace_back([&] { client(stop, fail, clientRounds); });
    threads.emplace_back([&] { probeUntil(npfd, stop, fail); });
    const auto end = Clock::now() + soakSeconds();
    while (Clock::now() < end && !fail.any())
        std::this_thread::sleep_for(100ms);
    stop = true;
    for (std::thread& t : threads)
        t.join();
    ASSERT_FALSE(fail.any()) << fail.text() << logTail(npfd);
    EXPECT_GT(evictorRounds.load(), 0u);
    EXPECT_GT(exactRounds.load(), 0u);
    EXPECT_GT(clientRounds.load(), 0u);
    ASSERT_TRUE(answersHello(npfd)) << logTail(npfd);
    // The path that froze npfd was taken while grace periods waited for the
    // worker.
    Counters r;
    ASSERT_TRUE(test::waitUntil([&] {
        r = delta(rig.regionSnapshot(), r0);
        return r[reached] > 0;
    })) << reached << " stayed 0: " << describe(r);
    EXPECT_GT(r["grace_waits"], 0u) << describe(r);
    std::printf("%llu + %llu streams byte for byte, %llu rounds of the shape's client; region counters: %s\n",
                (unsigned long long)evictorRounds.load(), (unsigned long long)exactRounds.load(),
                (unsigned long long)clientRounds.load(), describe(r).c_str());
    EXPECT_EQ(npfd.stop(), 0) << "npfd did not stop on SIGTERM";
}

TEST_F(NpfdFaultIsolation, PunchedPagesBesideEvictionKeepEveryoneServed)
{
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, NpfdOptions{.clients = rules()});
    besideEviction(rig, npfd, dir, "fast_path_faults_in_grace",
                   [&](const std::atomic<bool>& stop, Failures& fail, std::atomic<uint64_t>& rounds) {
        punchUntil(rig, npfd, stop, fail, rounds);
    });
}

// The 2 MiB shape's client: npf-recv --connect --page-size 2M, cold, a
// budget of one page (its stream fills one), its huge pages installed by its
// own thread; stream after stream, byte for byte.
TEST_F(NpfdFaultIsolation, HugePagesTheClientInstallsBesideEvictionKeepEveryoneServed)
{
    topology::HugePages pool(48);
    if (!pool.ok())
        GTEST_SKIP() << "2 MiB huge pages unavailable: " << pool.why();
    pool.warm();
    Rig rig;
    TempDir dir;
    Npfd npfd(rig, dir, NpfdOptions{.clients = rules()});
    besideEviction(rig, npfd, dir, "client_installs",
                   [&](const std::atomic<bool>& stop, Failures& fail, std::atomic<uint64_t>& rounds) {
        for (uint32_t r = 0; !stop.load() && !fail.any(); r++) {
            const std::string stem = dir.path + "/huge-" + std::to_string(r);
            writeStream(stem + ".in", kBesideStream, 900 + r);
            auto c = startClientRecv(rig, npfd, kFirstPort + 2, stem + ".out", stem + ".err",
                                     {"-n", std::to_string(kBesideStream / 1024), "--idle", "3", "--cold", "--region",
                                      "32M", "--budget", "2M", "--page-size", "2M"});
            auto ok = c->ready();
            int sent = -1, st = -1;
            if (ok && (sent = socatSend(rig, stem + ".in", kFirstPort + 2)) == 0 &&
                c->wait(int(test::kDeadline.count()), &st) && st == 0 &&
                readFile(stem + ".out") == readFile(stem + ".in")) {
                rounds++;
                continue;
            }
            fail.add("the 2 MiB client's stream " + std::to_string(r) + ": " +
                     (ok ? "socat " + std::to_string(sent) + ", exit " + std::to_string(st) : ok.message()) +
                     "; its stderr:\n" + readFile(stem + ".err"));
            return;
        }
    });
}

} // namespace
} // namespace npf::e2e
