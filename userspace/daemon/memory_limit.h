// npfd's memory check at start: the memory its queues will pin (queue_plan.h:
// the UMEM and rings of every RX queue of every interface, 16 MiB a queue at
// MTU 1500) plus kMemoryHeadroom for npfd itself must fit the memory limit
// of its cgroup (cgroup_memory.h). Above it, the kernel would OOM-kill npfd
// part way through attaching (in a pod with a memory limit: a crash loop
// with no message); instead npfd refuses to start, naming the numbers and
// the fixes (--queues N, or a larger limit), and exits kExitMemoryLimit.
//
// The headroom: what npfd holds besides its queues -- code, heap, threads'
// stacks, BPF maps, and what its first clients make it hold (per flow a
// 64 KiB post ring map and a completion ring of 256 KiB by default; per
// region its resident bitmap and page state; evicted content in the spill).
// 64 MiB covers npfd with a handful of clients (measured on kernel 6.18,
// cgroup v1: an idle npfd with one queue at MTU 1500 is charged 18.6 MiB,
// its 16.3 MiB queue and 2.3 MiB of its own; with four, 67 MiB at the peak
// of its start for 65.3 MiB of queues); more clients need more: size the
// limit for them (docs/cli.md, "npfd").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/cgroup_memory.h"
#include "daemon/config.h"
#include "engine/queue_plan.h"
#include "sys/error.h"

namespace npf::daemon {

inline constexpr uint64_t kMemoryHeadroom = 64ull << 20;

// npfd would not fit its memory limit (what() says by how much and what to
// do); npfd exits kExitMemoryLimit.
class MemoryLimitError : public Error {
public:
    explicit MemoryLimitError(const std::string& what) : Error(ENOMEM, what) {}
};

struct IfaceMemory {
    std::string label;  // as configured
    std::string ifname; // in its namespace
    QueuePlan plan;
};

// Each interface's queue plan, read in its network namespace.
std::vector<IfaceMemory> planMemory(const std::vector<std::string>& labels, const std::vector<IfaceSpec>& specs,
                                    const EngineConfig& engine);

// Bytes the plan pins, serving at most `maxQueues` queues per interface.
uint64_t pinnedBytes(const std::vector<IfaceMemory>& plan, uint32_t maxQueues = UINT32_MAX);

// Logs the figures; throws MemoryLimitError when the plan's pinned bytes
// plus kMemoryHeadroom exceed `limit`.
void checkMemoryLimit(const std::vector<IfaceMemory>& plan, const std::optional<MemoryLimit>& limit);

} // namespace npf::daemon
