// A receiver on the installed libnpf and its headers alone: opens an engine
// on IFACE with a cold 8 MiB region, posts a 1024-byte buffer for every
// datagram of the file EXPECTED, prints "ready", then receives the stream
// (the datagrams of EXPECTED, in order, each 1024 bytes but the last) and
// checks every completion and the region against the file, byte for byte.
// Usage: consumer IFACE PORT EXPECTED      (root; exit 0: all received)
#include <npf/engine.h>
#include <npf/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kBuf = 1024;
constexpr auto kDeadline = std::chrono::seconds(30);

int fail(const std::string& why)
{
    std::fprintf(stderr, "consumer: %s\n", why.c_str());
    return 1;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 4)
        return fail("usage: consumer IFACE PORT EXPECTED");
    std::ifstream in(argv[3], std::ios::binary);
    const std::vector<char> want{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const uint64_t datagrams = (want.size() + kBuf - 1) / kBuf;
    if (want.empty() || datagrams > NPF_POST_RING_SIZE)
        return fail(std::string(argv[3]) + ": empty, or more datagrams than a post ring holds");
    if (std::string(npf_version()) != NPF_VERSION_STRING || npf_abi_version() != NPF_ABI_VERSION)
        return fail(std::string("built against npf ") + NPF_VERSION_STRING + ", runs with " + npf_version());

    try {
        npf::EngineConfig cfg;
        cfg.ifname = argv[1];
        cfg.regionSize = 8ull << 20; // cold: nothing populated, every page faults in
        npf::Engine eng(cfg);
        npf::Flow& flow = eng.openFlow(static_cast<uint16_t>(std::stoul(argv[2])));
        for (uint64_t i = 0; i < datagrams; i++)
            if (!flow.post(i * kBuf, kBuf))
                return fail("post " + std::to_string(i) + " refused");
        flow.flush();
        std::printf("ready\n");
        std::fflush(stdout);

        uint64_t done = 0, faults = 0;
        const auto deadline = std::chrono::steady_clock::now() + kDeadline;
        npf_completion c[64];
        while (done < datagrams) {
            if (std::chrono::steady_clock::now() > deadline)
                return fail("timed out after " + std::to_string(done) + " of " + std::to_string(datagrams) +
                            " datagrams");
            // wait() returns a count (size_t, or int with a negative errno): both compile.
            auto n = flow.wait(c, std::chrono::milliseconds(100));
            if (n <= 0) {
                if (n != 0)
                    return fail("wait: " + std::string(std::strerror(static_cast<int>(-n))));
                if (!flow.failure().empty())
                    return fail("flow failed: " + flow.failure());
                continue;
            }
            for (decltype(n) i = 0; i < n; ++i, ++done) {
                const npf_completion& e = c[i];
                const uint64_t len = std::min<uint64_t>(kBuf, want.size() - done * kBuf);
                if (e.seq != done || e.offset != done * kBuf || e.status != NPF_CS_OK || e.len != len)
                    return fail("completion " + std::to_string(done) + ": seq " + std::to_string(e.seq) +
                                " offset " + std::to_string(e.offset) + " status " + std::to_string(e.status) +
                                " len " + std::to_string(e.len) + ", expected OK with " + std::to_string(len) +
                                " bytes");
                faults += (e.flags & NPF_CF_FAULT) != 0;
            }
        }
        if (std::memcmp(eng.region(), want.data(), want.size()) != 0)
            return fail("the region differs from " + std::string(argv[3]));
        std::printf("%llu datagrams, %zu bytes byte for byte (%llu by the fault path), npf %s\n",
                    static_cast<unsigned long long>(done), want.size(), static_cast<unsigned long long>(faults),
                    npf_version());
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    return 0;
}
