// Throughput of Sequencer::markDone + publish into a CompletionRing.
// Usage: npf-order-bench [seqs] [workers]   Prints a table, then one JSON line.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cli/version.h"
#include "order/completion_ring.h"
#include "order/sequencer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
    const char* name;
    uint64_t seqs;
    double secs;
};

std::vector<npf_post> postRing()
{
    std::vector<npf_post> p(NPF_POST_RING_SIZE);
    for (uint32_t i = 0; i < NPF_POST_RING_SIZE; ++i)
        p[i] = {uint64_t(i) * 2048, 1500, 0};
    return p;
}

// One thread: mark a batch done (reverse order), publish, consume.
Result singleThread(uint64_t n)
{
    auto posts = postRing();
    npf::Sequencer s(npf::dataplane::PostSlots(posts.data()));
    npf::CompletionRing ring = npf::CompletionRing::create(4096, "bench");
    npf::CompletionProducer producer(ring);
    npf::CompletionConsumer consumer(ring);
    std::vector<npf_completion> out(256);
    const auto t0 = Clock::now();
    uint64_t done = 0, got = 0;
    while (got < n) {
        for (uint64_t i = 64; i-- > 0;)
            s.markDone(static_cast<uint32_t>(done + i), 1000, NPF_CS_OK, 0);
        done += 64;
        s.publish(0, done, producer);
        size_t k;
        while ((k = consumer.poll(out.size(), out.data())) != 0)
            got += k;
    }
    return {"1 thread, batches of 64 in reverse", got, std::chrono::duration<double>(Clock::now() - t0).count()};
}

// `workers` threads claim from a shared cursor and markDone; one thread
// publishes, consumes and reposts.
Result concurrent(uint64_t n, int workers)
{
    auto posts = postRing();
    npf::Sequencer s(npf::dataplane::PostSlots(posts.data()), {.reorderTimeout = std::chrono::hours(1)});
    npf::CompletionRing ring = npf::CompletionRing::create(4096, "bench");
    npf::CompletionProducer producer(ring);
    npf::CompletionConsumer consumer(ring);
    std::atomic<uint64_t> cons{0}, prod{NPF_POST_RING_SIZE};
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int w = 0; w < workers; ++w)
        ts.emplace_back([&] {
            for (;;) {
                uint64_t c = cons.load(std::memory_order_acquire);
                if (c >= n)
                    return;
                if (c >= prod.load(std::memory_order_acquire)) {
                    std::this_thread::yield();
                    continue;
                }
                if (cons.compare_exchange_weak(c, c + 1))
                    s.markDone(static_cast<uint32_t>(c), 1000, NPF_CS_OK, 0);
            }
        });
    std::vector<npf_completion> out(256);
    uint64_t got = 0;
    while (got < n) {
        s.publish(0, cons.load(std::memory_order_acquire), producer);
        const size_t k = consumer.poll(out.size(), out.data());
        got += k;
        prod.store(got + NPF_POST_RING_SIZE, std::memory_order_release);
        if (!k)
            std::this_thread::yield();
    }
    for (auto& t : ts)
        t.join();
    static char name[64];
    std::snprintf(name, sizeof(name), "%d workers + publisher", workers);
    return {name, got, std::chrono::duration<double>(Clock::now() - t0).count()};
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
        std::puts(npf::cli::versionLine("npf-order-bench").c_str());
        return 0;
    }
    const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 10'000'000;
    const int workers = argc > 2 ? std::atoi(argv[2]) : 3;
    if (n == 0 || workers < 1 || workers > 64) {
        std::fprintf(stderr, "usage: %s [seqs > 0] [workers 1..64]\n", argv[0]);
        return 2;
    }
    const Result rs[] = {singleThread(n), concurrent(n, workers)};
    std::printf("%-40s %12s %10s %10s\n", "case", "seqs", "seconds", "Mseq/s");
    for (const Result& r : rs)
        std::printf("%-40s %12llu %10.3f %10.2f\n", r.name, static_cast<unsigned long long>(r.seqs),
                    r.secs, r.seqs / r.secs / 1e6);
    std::printf("{\"bench\":\"order\",\"results\":[");
    for (size_t i = 0; i < 2; ++i)
        std::printf("%s{\"case\":\"%s\",\"seqs\":%llu,\"seconds\":%.6f,\"mseq_per_s\":%.3f}", i ? "," : "",
                    rs[i].name, static_cast<unsigned long long>(rs[i].seqs), rs[i].secs,
                    rs[i].seqs / rs[i].secs / 1e6);
    std::printf("]}\n");
    return 0;
}
