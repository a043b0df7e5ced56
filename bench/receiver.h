// The contenders: receivers that run against the same traffic, each
// reporting through Meters (one per receiving thread, "lane").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "npf/abi.h"
#include "npf/engine.h"
#include <vector>

#include "meter.h"

namespace npf::topology {
class HugePages;
}

namespace npf::bench {

// Where received payloads go: slot i of the receive memory is
// [i * stride + skew, + bufLen). Slots are used round robin over the region.
struct RxConfig {
    std::string ifname, addr;
    uint16_t port = 9000;
    uint32_t queues = 1;
    std::vector<int> cpus{1}; // CPU of the receiving thread(s) (npf: workers, pager and app)
    uint32_t payload = 1472;
    uint64_t regionSize = 64ull << 20;
    uint32_t stride = 2048;
    uint32_t skew = 0;
    uint32_t bufLen = 2048;
    bool cold = false;          // receive memory starts non-resident
    uint64_t budget = 0;        // npf: resident budget (0 = unlimited)
    uint32_t prefetch = 256;    // npf: prefetch depth
    uint32_t frameCount = 2 * NPF_POST_RING_SIZE; // UMEM frames per queue, all contenders
    uint32_t frameSize = 2048;  // 4096 for datagrams above ~1.7 KB
    bool pagerBusyPoll = false; // npf: the pager spins instead of sleeping
    uint32_t pagers = 1;        // npf: pager threads; pager k on cpus[(n - 1 + k) % n]
    std::string npfd;           // npf-sidecar: the npfd binary ("" = the build tree's, else next to npf-bench)
    uint64_t releaseMin = 0;    // npf, npf-sidecar: release consumed buffers in runs of at least this many bytes
    bool verbose = false;

    uint64_t slots() const noexcept { return (regionSize - skew - bufLen) / stride + 1; }
    uint64_t slotOffset(uint64_t i) const noexcept { return (i % slots()) * stride + skew; }
};

class Receiver {
public:
    virtual ~Receiver() = default;
    // Receiving threads; start() takes that many meters.
    virtual size_t lanes() const { return 1; }
    virtual void start(std::vector<Meter*> meters) = 0;
    virtual void stop() = 0;
    // Pinned bytes (UMEM, mlock'd memory) and bytes resident now.
    virtual uint64_t pinnedBytes() const = 0;
    virtual uint64_t residentBytes() const = 0;
    // Counters of the contender's machinery (engine stats, kernel drops, ...).
    virtual nlohmann::json details() const = 0;
    // CPU seconds used so far by processes that receive for the contender
    // (npfd for npf-sidecar); the run's CPU time counts their share.
    virtual double helperCpuSeconds() const { return 0; }
    // Where received payloads go and how pages get there, in a word or
    // three: npf's region route (Region::route, from details()' "route"),
    // "pinned" (static-pinned), "umem" (xdp-drop), "socket".
    virtual std::string route() const = 0;
};

// kinds: npf (4 KiB pages, the page pool where the kernel has UFFDIO_MOVE),
// npf-reserve (npf with its budget, else its region, reserved before the window),
// npf-memfd (4 KiB, a memfd: a fresh page per install), npf-2m (2 MiB
// transparent huge pages from the page pool), npf-2m-hugetlbfs (2 MiB from
// the hugetlbfs pool), npf-rtc and npf-2m-rtc (npf and npf-2m run to
// completion: no worker thread, the app's wait() runs the fast path),
// npf-sidecar (through npfd), npf-sidecar-own (npfd
// installs through its own mapping), npf-sidecar-2m (through npfd, a 2 MiB
// hugetlbfs region), npf-noprefetch, drop-on-fault, blocking,
// xdp-drop, static-pinned, recvmmsg, io_uring. Must be called inside the rx
// netns.
std::unique_ptr<Receiver> makeReceiver(const std::string& kind, const RxConfig& cfg);
const std::vector<std::string>& receiverKinds();

// Implementations.
std::unique_ptr<Receiver> makeNpfReceiver(const std::string& kind, const RxConfig& cfg);
// The in-process engine of npf contender `kind` ("npf", "npf-2m", ...): what
// npf runs, and what npf-sidecar's delegated client runs.
EngineConfig npfEngineConfig(const std::string& kind, const RxConfig& cfg);
// npf::Client + an npfd it starts (rx_sidecar.cpp): npf-sidecar[-2m]
// delegated (the bench runs the engine npf[-2m] runs, on npfd's sockets),
// npf-sidecar-brokered[-2m] (npfd runs it), npf-sidecar-own (brokered, npfd
// installs the client's pages into its own mapping: client_install_wait_us 0).
std::unique_ptr<Receiver> makeSidecarReceiver(const std::string& kind, const RxConfig& cfg);
std::unique_ptr<Receiver> makeXskReceiver(bool copy, const RxConfig& cfg);
std::unique_ptr<Receiver> makeRecvmmsgReceiver(const RxConfig& cfg);
std::unique_ptr<Receiver> makeIoUringReceiver(const RxConfig& cfg);

// 2 MiB pages reserved in the hugetlbfs pool for a contender's run (the
// budget's plus `spare`, or the whole region's) and warmed once, as a pool
// reserved at boot is (huge_pages.h); *warmSeconds, if given, gets how long
// that took. Throws, naming `kind`, when the kernel cannot find them.
std::unique_ptr<topology::HugePages> reserveHugePages(const std::string& kind, const RxConfig& cfg, uint64_t spare,
                                                      double* warmSeconds = nullptr);

// Resident bytes of [p, p + len) (mincore).
uint64_t residentOf(const void* p, uint64_t len);

} // namespace npf::bench
