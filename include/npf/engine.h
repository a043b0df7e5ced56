// libnpf: receive UDP datagrams into pageable, unpinned memory.
//
//   npf::Engine eng({.ifname = "eth0", .regionSize = 64ull << 30, .residentBudget = 1ull << 30});
//   npf::Flow& f = eng.openFlow(9000);
//   f.post(0, 2048);                       // receive buffers: [offset, offset + len) of eng.region()
//   npf_completion c[64];
//   int n = f.wait(c, std::chrono::milliseconds(100));   // > 0: in seq order, bytes in place; 0: timeout; < 0: -errno
//
// The engine attaches the XDP program itself unless `npfctl attach` already
// did (and then never detaches it), binds a primary and a backup AF_XDP socket
// per RX queue, runs one worker thread per queue (none with runToCompletion:
// the application's calls run the fast path) and pagerThreads pager threads.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npf/abi.h"
#include "npf/stats.h"

namespace npf {

enum class XdpMode { Native, Skb };

// What happens to a datagram whose destination page is not resident. Backup
// is npf; the other two are the alternatives npf is measured against.
enum class FaultPolicy {
    Backup, // steered to the backup ring, placed by the pager with UFFDIO_COPY (npf)
    Drop,   // dropped (completed LOST) while the page is brought in: a NIC without NPF
    Block,  // everything goes to the primary ring; the worker takes the page fault
            // itself and the queue stalls behind it (head-of-line blocking)
};

// Where a region's pages come from (docs/architecture.md, "Where a region's
// pages come from").
enum class RegionMemory {
    // 4 KiB pages: Anonymous. 2 MiB pages: PagePool where the kernel has
    // UFFDIO_MOVE (Linux 6.8) and transparent huge pages, else Memfd.
    Auto,
    // Private anonymous memory and a pool of pages faulted in once at start,
    // moved into the region to install and back out to evict (UFFDIO_MOVE):
    // no page allocated or freed in the steady state. 2 MiB pages are then
    // transparent huge pages (MADV_HUGEPAGE), not hugetlbfs.
    PagePool,
    Memfd,     // a memfd: shmem, or hugetlbfs for 2 MiB pages
    // Private anonymous memory, 4 KiB pages: each install copies the page in
    // (UFFDIO_COPY, the kernel takes a page off its free lists), each
    // eviction frees it (MADV_DONTNEED). Not for 2 MiB pages.
    Anonymous,
};

struct EngineConfig {
    std::string ifname;
    XdpMode mode = XdpMode::Native;       // used when the engine attaches the program
    uint32_t queues = 0;                  // RX queues to serve: 0 = all the program serves
    uint64_t regionSize = 1ull << 30;     // bytes of virtual receive memory (multiple of pageSize)
    uint64_t residentBudget = 0;          // bytes the region may keep resident; 0 = unlimited
    // The region's page size: 4096, or 2 MiB (2ull << 20): hugetlbfs pages
    // from the kernel's pool (/proc/sys/vm/nr_hugepages must hold the
    // resident budget, or the whole region without one), or transparent
    // huge pages with RegionMemory::PagePool. Residency, faults, eviction
    // and prefetch then move 2 MiB at a time.
    uint64_t pageSize = 4096;
    RegionMemory regionMemory = RegionMemory::Auto;
    // Bytes of pages allocated when the engine starts and kept for the
    // region, as the kernel's huge page pool is kept for hugetlbfs: a cold
    // region's first installs take them instead of fresh pages from the
    // kernel (on a VM with free page reporting, 10 us or more each): with
    // PagePool they fill the pool; with Anonymous a run of them is freed
    // just before each install copies as many in, so that the copy takes
    // recycled pages. Refused with Memfd. At most the region's size; 0 = none.
    // A cold region of 2 MiB pages wants one: a fresh huge page can take
    // milliseconds (compaction; on a VM the host's faults), its datagrams
    // arrive in microseconds (npf-recv reserves its budget by default).
    uint64_t reserve = 0;
    FaultPolicy faultPolicy = FaultPolicy::Backup;
    uint32_t prefetchDepth = 256;         // posted buffers to populate after a fault; 0 = off
    // A seq whose datagram was provably dropped (docs/architecture.md, "When a
    // seq is LOST") completes LOST this long after the proof.
    std::chrono::microseconds reorderTimeout{1000};
    // Verify each datagram's UDP checksum while copying it (a wrong one
    // completes NPF_CS_BAD_CSUM). Turn off only for a source that is trusted
    // to deliver intact payloads yet sends partial checksums, such as a veth
    // peer with tx checksum offload on (docs/architecture.md, "Checksums").
    bool verifyUdpChecksum = true;
    // UMEM and RX rings per queue (the UMEM is the only pinned memory:
    // frameSize * frameCount). A packet larger than a frame (jumbo frames)
    // spans several frames and RX descriptors (multi-buffer AF_XDP). A flow's
    // posted buffers bound the datagrams in flight, so RX rings with room for
    // NPF_POST_RING_SIZE of the interface's largest packets and twice as many
    // frames never overflow with one flow: the post ring is the flow control.
    // 0 = sized so from the interface's MTU when the engine starts:
    // MTU 1500: 2048-byte frames, 8192 (16 MiB), 4096-entry
    // rings; MTU 9000: 4096-byte frames, 3 per datagram, 24576 (96 MiB),
    // 16384-entry rings. Set them lower if fewer large datagrams can be in
    // flight (fewer buffers posted): too few frames show as kernel drops.
    uint32_t frameSize = 0;               // 2048 or 4096; 0 = the one that pins least per largest packet
    uint32_t frameCount = 0;
    uint32_t rxRingSize = 0;              // RX ring entries per socket (a power of two)
    uint32_t completionRingSize = 8192;   // per flow, >= NPF_POST_RING_SIZE
    std::vector<int> workerCpus;          // CPU per queue worker (index = queue); empty = no pinning
    // Run to completion: no worker threads. The application's poll(),
    // wait() and arm() run the fast path (each queue's primary ring: copy,
    // complete, publish) on its own thread, and eventFd() also becomes
    // readable when a queue has datagrams waiting. One thread fewer on the
    // CPU and no hand-off per batch; datagrams wait in the socket's ring
    // while the application is busy elsewhere (a full ring drops: kernel
    // drops, then LOST). The fault path keeps its pagers. workerCpus is unused.
    bool runToCompletion = false;
    // Pager threads (the fault path). Pager k serves the backup rings (and
    // the deferred datagrams) of queues q with q % pagerThreads == k, and the
    // CPU faults, prefetch and protection of regions handed out round robin
    // after the queues (docs/architecture.md, "Pagers"). 1 suits one queue
    // and one region; give more when queues or regions are many and the
    // machine has cores for them.
    uint32_t pagerThreads = 1;
    std::vector<int> pagerCpus;           // CPU per pager (index = pager); empty = no pinning
    // The pagers spin instead of sleeping in poll(): a fault is picked up in
    // microseconds instead of a thread wakeup (15-50 us on a VM). Give each
    // a core of its own.
    bool pagerBusyPoll = false;
    // Where evicted content is saved: an unlinked file in this directory, so
    // the kernel can write it back and drop it from memory. "" = a memfd
    // (stays in RAM: eviction then bounds the region, not the process).
    std::string spillDir = "/var/tmp";
    // JSON snapshot for `npfctl stats`; "" = /run/npf/netns-<inode>/<ifname>/engine.json,
    // <inode> the network namespace's (as the pins: NPF_PIN_ROOT/netns-<inode>/<ifname>/);
    // "-" = none (npf::Client's delegated engine, unless its config names one).
    std::string statsPath;
    // When the engine attaches the program: an XDP program to chain behind
    // npf_xdp, which gets every packet npf passes (docs/architecture.md,
    // "Coexisting with other XDP programs"): the one pinned at xdpThenPin
    // (bpffs), or with xdpThenExisting the one attached to the interface,
    // taken over in one step (opening it by id needs CAP_SYS_ADMIN). When the
    // engine detaches, the chained program takes npf_xdp's place.
    std::string xdpThenPin;
    bool xdpThenExisting = false;
};

// Receiver-granted credits for one flow (docs/architecture.md, "Credits"):
// the engine tells the flow's sender, in a small UDP datagram (npf_credit,
// npf/abi.h) to the address and port its datagrams come from, how many more
// it may send: as many as the application has posted buffers for. A sender
// that honours them (npf::Sender, npf/sender.h; npf-send) never sends a
// datagram that would find no buffer (drop_rnr), however slow the fault path.
// At most one message per NPF_CREDIT_EVERY datagrams the flow received, and
// per `interval`: a forged source address cannot make the engine an amplifier.
struct CreditConfig {
    bool enabled = false;
    uint32_t step = 64;                      // datagrams of new grant worth a message (>= 1)
    std::chrono::microseconds interval{100}; // at least this between two messages of the flow
};

// How a flow is opened: its destination address ("" = any) and credits.
struct FlowOptions {
    std::string addr;
    CreditConfig credits;
};

class Engine;

// One flow: a UDP destination whose datagrams land in posted buffers.
//
// Threads: post(), flush(), poll(), wait() and arm() belong to one
// application thread at a time (the flow's owner; hand it over with your own
// synchronisation). id(), port(), eventFd(), failure() and stats() may be
// called from any thread. The Flow lives until Engine::closeFlow /
// Client::closeFlow or the engine's / client's destruction.
//
// Results: poll(), wait() and arm() return a count (>= 0) or a negative
// errno, like ibv_poll_cq and io_uring_wait_cqe:
//   -ENODEV  the interface is gone (in-process engine)
//   -EPIPE   npfd is gone or dropped the connection (npf::Client)
//   -EPROTO  the completion ring was found corrupt (npf::Client: npfd wrote
//            a cursor out of range)
// Completions already in the ring are returned before the error. failure()
// says why in words. After an error nothing more arrives: close the flow;
// the content of buffers completed so far stays in the region.
class Flow {
public:
    uint32_t id() const noexcept;
    uint16_t port() const noexcept;
    // Posts a receive buffer [offset, offset + len) of the region; `cookie`
    // comes back in its completion (npf_completion::cookie), e.g. a pointer
    // to the application's request. False when NPF_POST_RING_SIZE buffers
    // are outstanding (posted, not yet polled). Throws std::invalid_argument
    // if the buffer is outside the region. A posted buffer's pages are not
    // evicted until its completion is polled.
    //
    // Posts reach XDP in groups: every kPostBurst posts, and at the latest on
    // the next poll(), wait(), arm() or flush() (the post cursor's cache line
    // is shared with XDP on every CPU; publishing it per post costs a line
    // transfer per datagram). A datagram that finds no published buffer is
    // dropped (counted drop_rnr): call flush() after posting fewer than
    // kPostBurst buffers if you will not poll soon.
    bool post(uint64_t offset, uint32_t len, uint64_t cookie = 0);
    // Makes every post so far visible to XDP now.
    void flush() noexcept;
    static constexpr uint32_t kPostBurst = 16;
    // Copies the completions ready now (at most out.size()) to `out`, in seq
    // order; never blocks, never makes a system call. Returns how many, or a
    // negative errno once the flow failed and nothing is left (see above).
    int poll(std::span<npf_completion> out) noexcept;
    // Blocks up to `timeout` (negative: no limit) for at least one
    // completion. Returns how many (> 0), 0 when the timeout passed, or a
    // negative errno (see above): a timeout is never confused with the
    // source being gone.
    int wait(std::span<npf_completion> out, std::chrono::milliseconds timeout) noexcept;
    // Event loops (epoll, poll, select, io_uring POLL_ADD): eventFd() is a
    // file descriptor that becomes readable after arm(), when the next
    // completion is ready or the flow fails (with
    // EngineConfig::runToCompletion also when datagrams wait for the fast
    // path, which the next poll() or arm() runs). arm() asks for that one signal
    // (in the spirit of ibv_req_notify_cq) and clears what the fd held:
    //   0   armed: nothing is ready; sleep on eventFd()
    //   > 0 completions are ready now (not armed): poll() them, then arm again
    //   < 0 the flow failed (see above)
    // No wake-up is lost between a poll() that found nothing and arm(); a
    // spurious readability is possible (poll() then returns 0: arm again).
    // The loop, with the fd registered in epoll once (level-triggered):
    //   for (;;) {
    //       int n;
    //       while ((n = f.poll(c)) > 0) consume(c, n);
    //       if (n < 0 || (n = f.arm()) < 0) break;   // failed
    //       if (n == 0) epoll_wait(ep, ev, 16, -1);  // armed
    //   }
    // wait() does the same by itself; do not mix the two on one flow at once.
    int arm() noexcept;
    int eventFd() const noexcept;
    // Buffers posted and not yet polled.
    uint64_t outstanding() const noexcept;
    // Why the flow is no longer served, "" while it is: the interface is
    // gone (in-process engine), or npfd is gone or dropped the connection
    // (npf::Client).
    std::string failure() const;
    // Every datagram of this flow since it was opened, accounted once: XDP's
    // outcomes for it, its completions by status, what is in flight
    // (npf/stats.h, FlowStats; docs/cli.md "Accounting"). Any thread. In
    // process from the engine and XDP's per-flow counters; through npfd one
    // request, answered for this client's own flow only. Throws
    // std::system_error when they cannot be read (npfd gone, the interface gone).
    FlowStats stats() const;

    struct Impl;
    explicit Flow(std::unique_ptr<Impl> impl);
    ~Flow();
    Flow(const Flow&) = delete;
    Flow& operator=(const Flow&) = delete;

private:
    friend class Engine;
    friend class Client;
    // wait() with EngineConfig::runToCompletion.
    int waitRunning(std::span<npf_completion> out, std::chrono::milliseconds timeout) noexcept;
    std::unique_ptr<Impl> impl_;
};

// The in-process engine of one interface.
//
// Privileges: CAP_NET_ADMIN, CAP_BPF (or CAP_SYS_ADMIN) and CAP_PERFMON to
// attach npf_xdp, CAP_NET_RAW to create the AF_XDP sockets, CAP_IPC_LOCK (or
// a large enough RLIMIT_MEMLOCK) for the UMEM; root has them. An unprivileged
// process receives through npfd instead (npf/client.h). The region's userfaultfd
// needs CAP_SYS_PTRACE or read-write access to /dev/userfaultfd when
// vm.unprivileged_userfaultfd is 0 (the default): it is a full one, so that
// the application's own system calls on the region (recv() into a buffer,
// write() from one) wait for a page the engine evicted instead of failing
// with EFAULT, as they would for an npfd client.
// One Engine per interface and network namespace in a process and on the
// machine (a second one finds the flows' map in use and fails).
//
// Threads: the Engine's methods may be called from any thread, concurrently
// with each other and with its flows' owners, except the destructor and
// closeFlow(f) (no thread may use f or be inside one of its calls then).
class Engine {
public:
    // Throws std::system_error naming what failed (interface, attach, sockets, userfaultfd).
    explicit Engine(const EngineConfig& cfg);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Opens (or takes over, after a restart) the flow for UDP destination port
    // `port`, optionally only for destination address `addr`.
    Flow& openFlow(uint16_t port, const std::string& addr = "");
    Flow& openFlow(uint16_t port, const FlowOptions& opts);
    // Stops serving `f` (its traffic passes to the kernel again) and destroys
    // it; its outstanding buffers complete no more and may be evicted.
    // Throws std::invalid_argument if `f` is not this engine's.
    void closeFlow(Flow& f);

    uint8_t* region() const noexcept;
    uint64_t regionSize() const noexcept;
    // The content of [offset, offset + len) is no longer needed: evicted
    // pages are not saved and come back zeroed. Call it as soon as the
    // application is done with received bytes (after consuming a completion,
    // before posting the buffer again): the pager then evicts without
    // writing the pages out, which is most of what eviction costs. Pages
    // that are never released are saved to the spill file when evicted.
    void release(uint64_t offset, uint64_t len);
    // Makes [offset, offset + len) resident now (zero-filled or restored),
    // within the budget. Returns pages installed.
    uint64_t populate(uint64_t offset, uint64_t len);
    // Evicts every page that no posted buffer covers (simulates memory
    // pressure, VM restore, swap-in). Returns pages evicted.
    uint64_t evictAll();

    // Why the engine stopped serving, "" while it serves. Set when the
    // interface disappears (ip link del, its namespace torn down); every
    // Flow::wait is woken then. Destroy the engine: it removes what it created.
    std::string failure() const;

    EngineStats stats() const;
    // Stats as one JSON object (what `npfctl stats` shows).
    std::string statsJson() const;
    // The XDP program's outcome counters (npf_stats, enum npf_stat order,
    // summed over CPUs): interface-wide, every flow and every packet, since
    // the program was attached. Throws std::system_error if the map read fails.
    std::array<uint64_t, NPF_STAT_MAX> xdpCounters() const;
    // RX queues served (a primary and a backup AF_XDP socket each).
    uint32_t queues() const noexcept;
    // True if this engine attached npf_xdp (and detaches it when destroyed);
    // false if it was attached already (`npfctl attach`) and stays.
    bool attachedByUs() const noexcept;

    struct Impl;
    // libnpf's own (npf::Client in delegated mode): an engine of its parts.
    explicit Engine(std::unique_ptr<Impl> impl);

private:
    friend class Client;
    std::unique_ptr<Impl> impl_;
};

} // namespace npf
