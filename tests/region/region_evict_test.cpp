// Eviction: content saved and restored bit-exact, released pages come back
// zeroed, protected pages stay, the budget holds under churn, grace periods.
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <future>
#include <random>

#include "region_fixture.h"

namespace npf::test {
namespace {

class RegionEvict : public RegionOn {};
NPF_ON_EACH_MEMORY(RegionEvict);

// Fills pages [first, first + n) with random bytes through packet patches.
std::vector<uint8_t> fillPages(Region& r, uint64_t first, uint64_t n, uint32_t seed)
{
    auto bytes = randomBytes(n * kPg, seed);
    Patch p{first * kPg, bytes.data(), static_cast<uint32_t>(n * kPg)};
    int res[1];
    EXPECT_EQ(r.applyPatches({&p, 1}, res), 1);
    return bytes;
}

TEST_P(RegionEvict, EvictedPagesFaultAgainAndComeBackBitExact)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    auto a = fillPages(r, 100, 100, 1);
    auto b = fillPages(r, 1000, 1, 2);
    ASSERT_EQ(r.residentPages(), 101u);
    EXPECT_EQ(r.evictAll(), 101);
    RegionStats s = r.stats();
    EXPECT_EQ(s.evicted, 101u);
    EXPECT_EQ(s.spilled, 101u);
    EXPECT_EQ(s.residentPages, 0u);
    EXPECT_FALSE(r.isResident(100 * kPg, 1));
    EXPECT_EQ(heldBytes(r), 0u) << "punch hole did not free the pages";

    {
        PagerThread pager(r);
        std::thread app([&] {
            // Punched pages must raise a uffd fault, not map a silent zero page.
            EXPECT_EQ(std::memcmp(r.base() + 100 * kPg, a.data(), a.size()), 0);
        });
        app.join();
    }
    s = r.stats(); // the pager thread has been joined
    EXPECT_EQ(s.cpuFaults, 100u);
    EXPECT_EQ(s.restored, 100u);
    EXPECT_TRUE(r.isResident(100 * kPg, 100 * kPg));

    // A packet to an evicted page is patched over the saved content.
    auto p = randomBytes(500, 3);
    Patch ps[] = {{1000 * kPg + 3000, p.data(), 500}};
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    std::memcpy(&b[3000], p.data(), 500);
    EXPECT_EQ(std::memcmp(r.base() + 1000 * kPg, b.data(), kPg), 0);
    EXPECT_EQ(r.stats().restored, 101u);
}

TEST_P(RegionEvict, ReleasedPagesComeBackZeroed)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    auto a = fillPages(r, 10, 10, 4);
    auto b = fillPages(r, 40, 4, 5);
    // pages 11..18 fully covered; 10 and 19 only partly: kept
    EXPECT_EQ(r.release(10 * kPg + 1, 10 * kPg - 2), 8);
    ASSERT_EQ(r.evictAll(), 14);
    // Released while already evicted: the saved copy is dropped.
    EXPECT_EQ(r.release(40 * kPg, 2 * kPg), 2);
    RegionStats s = r.stats();
    EXPECT_EQ(s.discarded, 8u);
    EXPECT_EQ(s.spilled, 6u);
    PagerThread pager(r);
    std::thread app([&] {
        EXPECT_EQ(std::memcmp(r.base() + 10 * kPg, a.data(), kPg), 0);
        EXPECT_TRUE(allZero(r.base() + 11 * kPg, 8 * kPg));
        EXPECT_EQ(std::memcmp(r.base() + 19 * kPg, &a[9 * kPg], kPg), 0);
        EXPECT_TRUE(allZero(r.base() + 40 * kPg, 2 * kPg));
        EXPECT_EQ(std::memcmp(r.base() + 42 * kPg, &b[2 * kPg], 2 * kPg), 0);
    });
    app.join();
    pager.sync();
    EXPECT_EQ(r.stats().restored, 4u);
}

TEST_P(RegionEvict, ReleaseIsCancelledByNewContentOrProtect)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    fillPages(r, 0, 3, 6);
    EXPECT_EQ(r.release(0, 3 * kPg), 3);
    auto p = randomBytes(10, 7);
    Patch ps[] = {{kPg, p.data(), 10}}; // new payload: page 1 matters again
    int res[1];
    ASSERT_EQ(r.applyPatches(ps, res), 1);
    r.protect(2 * kPg, 1); // posted again: page 2 matters again
    r.unprotect(2 * kPg, 1);
    ASSERT_EQ(r.evictAll(), 3);
    EXPECT_EQ(r.stats().discarded, 1u);
    EXPECT_EQ(r.stats().spilled, 2u);
}

// release() drops a page's content on eviction, but a fast-path writer may
// put a new datagram into it afterwards without anything calling protect()
// (npfd's client posts its buffers straight to XDP). Its markReferenced()
// inside the epoch section ends the release, and eviction decides after the
// grace period, so the new data is saved: page 0 written before the eviction,
// page 1 by a writer that eviction is already waiting for.
TEST_P(RegionEvict, ReleasedPageWrittenOnTheFastPathIsSaved)
{
    NPF_REQUIRE_UFFD();
    EpochDomain epochs;
    Region r(withEpochs(epochs, config()));
    auto old = fillPages(r, 0, 2, 11);
    ASSERT_EQ(r.release(0, 2 * kPg), 2);
    auto fresh = randomBytes(1472, 12);
    auto fastWrite = [&](uint64_t off) {
        std::memcpy(r.base() + off, fresh.data(), fresh.size());
        std::memcpy(&old[off], fresh.data(), fresh.size());
        r.markReferenced(off, fresh.size());
    };
    {
        EpochDomain::Reader w(epochs);
        w.enter();
        ASSERT_TRUE(r.isResident(100, fresh.size()));
        fastWrite(100);
        w.exit();
    }
    std::promise<void> inside;
    std::atomic<bool> go{false};
    std::thread writer([&] {
        EpochDomain::Reader w(epochs);
        w.enter();
        bool resident = r.isResident(kPg + 100, fresh.size());
        inside.set_value();
        while (!go.load())
            std::this_thread::yield();
        if (resident)
            fastWrite(kPg + 100);
        w.exit();
        EXPECT_TRUE(resident);
    });
    inside.get_future().wait();
    auto ev = std::async(std::launch::async, [&] { return r.evictAll(); });
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (r.stats().graceWaits == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    EXPECT_EQ(r.stats().graceWaits, 1u) << "eviction did not wait for the writer";
    go = true;
    ASSERT_EQ(ev.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(ev.get(), 2);
    writer.join();
    RegionStats s = r.stats();
    EXPECT_EQ(s.discarded, 0u) << "a released page with new data was dropped";
    EXPECT_EQ(s.spilled, 2u);
    PagerThread pager(r);
    std::thread app([&] { EXPECT_EQ(std::memcmp(r.base(), old.data(), 2 * kPg), 0); });
    app.join();

    // Without new data, a released page is still dropped.
    ASSERT_EQ(r.release(0, kPg), 1);
    ASSERT_EQ(r.evictAll(), 2);
    EXPECT_EQ(r.stats().discarded, 1u);
}

TEST_P(RegionEvict, ProtectedPagesAreNeverEvicted)
{
    NPF_REQUIRE_UFFD();
    RegionConfig c = config();
    c.residentBudget = 16 * kPg;
    c.autoEvict = false;
    Region r(c);
    fillPages(r, 0, 64, 8);
    r.protect(5 * kPg + 100, 3 * kPg);  // pages 5..8
    r.protect(6 * kPg, 1);              // page 6 twice
    r.protect(60 * kPg, 4 * kPg);       // pages 60..63
    EXPECT_EQ(r.protectCount(6), 2u);
    EXPECT_GT(r.evictToBudget(), 0);
    EXPECT_LE(r.residentPages(), 16u);
    EXPECT_EQ(r.evictAll(), static_cast<int>(r.residentPages()) - 8);
    EXPECT_EQ(r.residentPages(), 8u);
    EXPECT_TRUE(r.isResident(5 * kPg, 4 * kPg));
    EXPECT_TRUE(r.isResident(60 * kPg, 4 * kPg));
    EXPECT_EQ(r.evictAll(), 0);
    EXPECT_GE(r.stats().evictBlocked, 1u);

    r.unprotect(5 * kPg + 100, 3 * kPg);
    EXPECT_EQ(r.protectCount(6), 1u);
    EXPECT_EQ(r.evictAll(), 3); // 5, 7, 8
    EXPECT_TRUE(r.isResident(6 * kPg, kPg));
    r.unprotect(6 * kPg, 1);
    r.unprotect(6 * kPg, 1); // unbalanced: stays at zero
    r.unprotect(60 * kPg, 4 * kPg);
    EXPECT_EQ(r.protectCount(6), 0u);
    EXPECT_EQ(r.evictAll(), 5);
}

TEST_P(RegionEvict, ClockGivesReferencedPagesASecondChance)
{
    NPF_REQUIRE_UFFD();
    RegionConfig c = config();
    c.residentBudget = 8 * kPg;
    c.maxBatchPages = 4;
    c.autoEvict = false;
    Region r(c);
    ASSERT_EQ(r.prefetch(0, 8 * kPg), 8);
    ASSERT_EQ(r.evictToBudget(), 0);
    ASSERT_EQ(r.prefetch(8 * kPg, 4 * kPg), 4); // 12 resident, all referenced
    // One full sweep clears the bits; the sweep after picks in clock order.
    r.markReferenced(0, 2 * kPg); // ignored until the hand comes round again
    ASSERT_GT(r.evictToBudget(), 0);
    EXPECT_LE(r.residentPages(), 8u);
    r.markReferenced(2 * kPg, kPg);
    ASSERT_EQ(r.prefetch(12 * kPg, 4 * kPg), 4);
    ASSERT_GT(r.evictToBudget(), 0);
    EXPECT_LE(r.residentPages(), 8u);
}

// Churn under a small budget, three writers at once, every byte checked
// against shadow copies at the end:
//  - an application thread writes random ranges anywhere in its area (no
//    epoch protocol: the write-protect fence keeps its writes from being lost
//    between save and punch);
//  - a fast-path worker (epoch reader) writes only when isResident() says so,
//    otherwise hands the payload to the pager, like the engine does;
//  - the pager (main thread) applies packet patches and hand-offs while the
//    pager thread serves faults; eviction runs automatically after each call.
TEST_P(RegionEvict, BudgetHoldsUnderChurnAndEveryByteSurvives)
{
    NPF_REQUIRE_UFFD();
    EpochDomain epochs;
    RegionConfig c = config(32ull << 20);
    c.residentBudget = 256 * kPg;
    c.maxBatchPages = 32;
    c.epochs = &epochs;
    Region r(c);
    constexpr uint64_t kAppPages = 1024, kPktFirst = 2048, kPktPages = 1024, kWrkFirst = 4096, kWrkPages = 512;
    std::vector<uint8_t> appShadow(kAppPages * kPg, 0), pktShadow(kPktPages * kPg, 0),
        wrkShadow(kWrkPages * kPg, 0);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> appWrites{0}, wrkDirect{0}, wrkHanded{0};
    // Hand-off slot from the worker to the pager: the worker waits until done.
    std::atomic<int> handoff{0}; // 0 empty, 1 posted, 2 done
    Patch handed{};

    PagerThread pager(r);
    std::thread app([&] {
        std::mt19937_64 g(42);
        while (!stop.load(std::memory_order_relaxed)) {
            uint64_t off = g() % (kAppPages * kPg - 9000);
            size_t len = 1 + g() % 9000;
            uint8_t v = static_cast<uint8_t>(g());
            std::memset(r.base() + off, v, len);
            std::memset(&appShadow[off], v, len);
            appWrites.fetch_add(1, std::memory_order_relaxed);
        }
    });
    std::thread worker([&] {
        EpochDomain::Reader reader(epochs);
        std::mt19937_64 g(43);
        std::vector<uint8_t> payload(1472);
        while (!stop.load(std::memory_order_relaxed)) {
            // a window of 8 pages that slides slowly, like a flow's posted buffers
            uint32_t len = 1 + static_cast<uint32_t>(g() % 1472);
            uint64_t window = (wrkDirect.load() + wrkHanded.load()) / 64 % (kWrkPages - 8);
            uint64_t off = window * kPg + g() % (8 * kPg - len);
            for (uint32_t i = 0; i < len; ++i)
                payload[i] = static_cast<uint8_t>(g());
            uint64_t dst = kWrkFirst * kPg + off;
            reader.enter();
            bool direct = r.isResident(dst, len);
            if (direct)
                std::memcpy(r.base() + dst, payload.data(), len);
            reader.exit();
            if (!direct) {
                handed = {dst, payload.data(), len};
                handoff.store(1, std::memory_order_release);
                while (handoff.load(std::memory_order_acquire) != 2 && !stop.load(std::memory_order_relaxed))
                    std::this_thread::yield();
                if (handoff.load(std::memory_order_acquire) != 2)
                    break;
                handoff.store(0, std::memory_order_relaxed);
            }
            std::memcpy(&wrkShadow[off], payload.data(), len);
            (direct ? wrkDirect : wrkHanded).fetch_add(1, std::memory_order_relaxed);
        }
    });
    std::mt19937_64 g(7);
    std::vector<std::vector<uint8_t>> payloads(64);
    std::vector<Patch> ps(64);
    std::vector<int> res(64);
    uint64_t maxRes = 0;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int rounds = 0;
    while (std::chrono::steady_clock::now() < until || rounds < 200) {
        for (size_t i = 0; i < ps.size(); ++i) {
            uint32_t len = 1 + static_cast<uint32_t>(g() % 1472);
            uint64_t off = g() % (kPktPages * kPg - len);
            payloads[i] = randomBytes(len, static_cast<uint32_t>(g()));
            ps[i] = {kPktFirst * kPg + off, payloads[i].data(), len};
            std::memcpy(&pktShadow[off], payloads[i].data(), len);
        }
        ASSERT_EQ(r.applyPatches(ps, res), 64);
        maxRes = std::max(maxRes, r.residentPages());
        if (handoff.load(std::memory_order_acquire) == 1) {
            int hr[1];
            ASSERT_EQ(r.applyPatches({&handed, 1}, hr), 1);
            handoff.store(2, std::memory_order_release);
        }
        if (++rounds % 50 == 0) {
            ASSERT_GE(r.evictAll(), 0);
        }
    }
    stop = true;
    app.join();
    worker.join();
    RegionStats s = r.stats();
    uint64_t peak = std::max(maxRes, pager.maxResident());
    EXPECT_LE(peak, 256u + 64 + 32) << "budget exceeded by more than a batch";
    EXPECT_GT(s.evicted, 1000u);
    EXPECT_GT(s.restored, 100u);
    EXPECT_GT(s.cpuFaults, 100u);
    EXPECT_GT(appWrites.load(), 100u);
    EXPECT_GT(wrkDirect.load(), 0u);
    EXPECT_GT(wrkHanded.load(), 0u);

    std::thread check([&] {
        EXPECT_EQ(std::memcmp(r.base(), appShadow.data(), appShadow.size()), 0) << "application bytes lost";
        EXPECT_EQ(std::memcmp(r.base() + kPktFirst * kPg, pktShadow.data(), pktShadow.size()), 0)
            << "packet bytes lost";
        EXPECT_EQ(std::memcmp(r.base() + kWrkFirst * kPg, wrkShadow.data(), wrkShadow.size()), 0)
            << "worker bytes lost";
    });
    check.join();
    std::printf("[ churn  ] %d patch batches, %llu app writes, worker %llu direct / %llu handed off, "
                "evicted %llu, restored %llu, cpu faults %llu, grace waits %llu, peak resident %llu pages "
                "(budget 256)\n",
                rounds, (unsigned long long)appWrites.load(), (unsigned long long)wrkDirect.load(),
                (unsigned long long)wrkHanded.load(), (unsigned long long)s.evicted,
                (unsigned long long)s.restored, (unsigned long long)s.cpuFaults,
                (unsigned long long)s.graceWaits, (unsigned long long)peak);
}

// An application thread keeps writing a few pages while the pager evicts
// them over and over: a write landing between the save and the punch would be
// lost without the write-protect fence.
TEST_P(RegionEvict, WritesRacingEvictionAreNeverLost)
{
    NPF_REQUIRE_UFFD();
    Region r(config());
    if (!r.writeProtectFence())
        GTEST_SKIP() << "no userfaultfd write-protect on shmem: only epoch readers are safe against eviction";
    constexpr uint64_t kPages = 4;
    std::vector<uint64_t> shadow(kPages * kPg / 8, 0);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> writes{0};
    PagerThread pager(r);
    std::thread app([&] {
        auto* words = reinterpret_cast<volatile uint64_t*>(r.base());
        for (uint64_t i = 1; !stop.load(std::memory_order_relaxed); ++i) {
            uint64_t w = (i * 509) % shadow.size();
            words[w] = i;
            shadow[w] = i;
            writes.fetch_add(1, std::memory_order_relaxed);
        }
    });
    int evictions = 0;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until || evictions < 500) {
        int n = r.evictAll();
        ASSERT_GE(n, 0);
        evictions += n;
    }
    stop = true;
    app.join();
    EXPECT_EQ(std::memcmp(r.base(), shadow.data(), kPages * kPg), 0) << "a write was lost to eviction";
    std::printf("[ race   ] %llu writes against %d page evictions\n", (unsigned long long)writes.load(),
                evictions);
}

// Eviction waits for a reader that is inside its section, and serves the
// fault the reader is blocked in meanwhile (no deadlock).
TEST_P(RegionEvict, GracePeriodWaitsForActiveReaderAndServesItsFaults)
{
    NPF_REQUIRE_UFFD();
    EpochDomain epochs;
    RegionConfig cfg = withEpochs(epochs, config());
    cfg.graceLimit = std::chrono::seconds(10); // the reader holds its section for 100 ms
    Region r(cfg);
    fillPages(r, 0, 4, 9);
    std::promise<void> entered, release;
    auto released = release.get_future().share();
    std::thread reader([&] {
        EpochDomain::Reader rd(epochs);
        rd.enter();
        entered.set_value();
        released.wait();
        (void)*(volatile uint8_t*)(r.base() + 100 * kPg); // cold: faults inside the section
        rd.exit();
    });
    entered.get_future().wait();
    auto ev = std::async(std::launch::async, [&] { return r.evictAll(); });
    EXPECT_EQ(ev.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
        << "eviction did not wait for the active reader";
    release.set_value();
    ASSERT_EQ(ev.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "deadlock";
    // what was resident when it was called; the page served meanwhile stays
    EXPECT_EQ(ev.get(), 4);
    reader.join();
    EXPECT_GE(r.stats().graceWaits, 1u);
    EXPECT_EQ(r.stats().cpuFaults, 1u);
    EXPECT_EQ(r.residentPages(), 1u);
}

// A reader that stays in its section past the grace bound (stuck, or held
// up): eviction gives the grace period up instead of waiting for ever, the
// victims stay resident with their bits set, and the next eviction after the
// reader left takes them.
TEST_P(RegionEvict, GracePeriodGivesUpOnAReaderThatNeverLeaves)
{
    NPF_REQUIRE_UFFD();
    EpochDomain epochs;
    RegionConfig cfg = withEpochs(epochs, config());
    cfg.graceLimit = std::chrono::milliseconds(20);
    Region r(cfg);
    fillPages(r, 0, 4, 9);
    {
        EpochDomain::Reader rd(epochs);
        rd.enter();
        EXPECT_EQ(r.evictAll(), -ETIMEDOUT);
        EXPECT_EQ(r.stats().graceTimeouts, 20u) << "evictAll tries 20 grace periods";
        EXPECT_EQ(r.stats().evicted, 0u);
        EXPECT_EQ(r.residentPages(), 4u);
        EXPECT_TRUE(r.isResident(0, 4 * kPg)) << "the victims' resident bits are set again";
        rd.exit();
    }
    EXPECT_EQ(r.evictAll(), 4);
    EXPECT_EQ(r.residentPages(), 0u);
}

TEST_P(RegionEvict, SpillIntoTmpfileDirectory)
{
    NPF_REQUIRE_UFFD();
    RegionConfig c = config();
    c.spillDir = "/tmp";
    Region r(c);
    auto a = fillPages(r, 3, 5, 10);
    ASSERT_EQ(r.evictAll(), 5);
    PagerThread pager(r);
    std::thread app([&] { EXPECT_EQ(std::memcmp(r.base() + 3 * kPg, a.data(), a.size()), 0); });
    app.join();
    pager.sync();
    EXPECT_EQ(r.stats().restored, 5u);
}

TEST(RegionConfigCheck, BadConfigsThrowWithTheRegionName)
{
    NPF_REQUIRE_UFFD();
    RegionConfig c = smallConfig(4097);
    try {
        Region r(c);
        FAIL() << "accepted a size that is not a page multiple";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find("npf-test-region"), std::string::npos) << e.what();
        EXPECT_EQ(e.code().value(), EINVAL);
    }
    c = smallConfig();
    c.maxBatchPages = 0;
    EXPECT_THROW(Region{c}, std::system_error);
    c = smallConfig();
    c.spillDir = "/nonexistent-npf-dir";
    EXPECT_THROW(Region{c}, std::system_error);
}

} // namespace
} // namespace npf::test
