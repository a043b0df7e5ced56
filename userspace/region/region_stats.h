// A region's counters: RegionStats (what Region::stats() returns), the
// table that names, describes and exports each (npf_region_<name>_total in
// Prometheus, group "region" of `npfctl stats`), and the Tally the region's
// parts count into.
#pragma once

#include <array>
#include <cstdint>

#include "npf/counters.h"
#include "sys/tally.h"

namespace npf {

// The monotonic counters (kRegionCounters says what each counts) and
// residentPages, pages of the region's page size present now.
struct RegionStats {
    uint64_t packetBatches = 0, patches = 0, patchBytes = 0, patchesToResident = 0;
    uint64_t packetFaults = 0, cpuFaults = 0, cpuFaultWakes = 0, pagesInstalled = 0;
    uint64_t copyCalls = 0, eexist = 0, prefetched = 0, evicted = 0, spilled = 0;
    uint64_t discarded = 0, releases = 0, restored = 0, evictBlocked = 0, graceWaits = 0, errors = 0;
    uint64_t vanished = 0, clientFaults = 0, clientIgnored = 0, clientGone = 0;
    uint64_t moveCalls = 0, poolInstalls = 0, poolReturns = 0, poolEmpty = 0, poolFull = 0, poolRefills = 0;
    uint64_t clientInstalls = 0, clientFallbacks = 0, clientLate = 0, clientSlow = 0;
    uint64_t fastPathFaults = 0, fastPathFaultsInGrace = 0, graceTimeouts = 0, protectCapped = 0;
    uint64_t reserveFreed = 0;
    uint64_t residentPages = 0;
};

inline constexpr std::array<CounterDef<RegionStats>, 38> kRegionCounters = {{
    {"packet_batches", &RegionStats::packetBatches, "calls", "batches of fault-path payloads placed"},
    {"patches", &RegionStats::patches, "patches", "patches applied"},
    {"patch_bytes", &RegionStats::patchBytes, "bytes", "bytes written by patches"},
    {"patches_to_resident", &RegionStats::patchesToResident, "patches", "patch pieces copied into pages already present"},
    {"packet_faults", &RegionStats::packetFaults, "pages", "pages installed for packet patches"},
    {"cpu_faults", &RegionStats::cpuFaults, "faults", "CPU fault events served"},
    {"cpu_fault_wakes", &RegionStats::cpuFaultWakes, "faults", "CPU faults served by a wake (page already present, EEXIST)"},
    {"pages_installed", &RegionStats::pagesInstalled, "pages", "pages installed (UFFDIO_COPY, CONTINUE or MOVE), all causes"},
    {"copy_calls", &RegionStats::copyCalls, "calls", "UFFDIO_COPY ioctls"},
    {"eexist", &RegionStats::eexist, "pages", "pages UFFDIO_COPY found present, populated behind the pager's back"},
    {"prefetched", &RegionStats::prefetched, "pages", "pages installed by prefetch"},
    {"evicted", &RegionStats::evicted, "pages", "pages punched out (or moved back into the pool)"},
    {"spilled", &RegionStats::spilled, "pages", "pages saved to the spill file"},
    {"discarded", &RegionStats::discarded, "pages", "released pages evicted without saving"},
    {"releases", &RegionStats::releases, "calls",
     "releases applied (Engine::release; an npfd client's release requests, adjoining ones sent as one)"},
    {"restored", &RegionStats::restored, "pages", "pages installed from saved content"},
    {"evict_blocked", &RegionStats::evictBlocked, "evictions", "evictions that found no victim (all protected)"},
    {"grace_waits", &RegionStats::graceWaits, "waits", "grace periods eviction had to wait for"},
    {"errors", &RegionStats::errors, "errors", "failed ioctls and spill I/O"},
    {"vanished", &RegionStats::vanished, "pages", "resident pages found punched by another process, installed again zeroed"},
    {"client_faults", &RegionStats::clientFaults, "faults", "fault events from the client's userfaultfd served"},
    {"client_ignored", &RegionStats::clientIgnored, "events",
     "client userfaultfd events ignored: address outside its region, or not a page fault"},
    {"client_gone", &RegionStats::clientGone, "clients", "client whose userfaultfd failed (it exited): no longer served"},
    {"move_calls", &RegionStats::moveCalls, "calls", "UFFDIO_MOVE ioctls (page pool)"},
    {"pool_installs", &RegionStats::poolInstalls, "pages", "pages installed by moving a page of the pool in"},
    {"pool_returns", &RegionStats::poolReturns, "pages", "evicted pages moved back into the pool"},
    {"pool_empty", &RegionStats::poolEmpty, "pages", "fresh pages allocated because the pool was empty"},
    {"pool_refills", &RegionStats::poolRefills, "calls",
     "times an install found the pool short and allocated fresh pages into it (pool_empty of them)"},
    {"pool_full", &RegionStats::poolFull, "pages",
     "evicted pages freed instead of pooled: the pool was full, or the page would not move"},
    {"client_installs", &RegionStats::clientInstalls, "pages",
     "pages installed into the client's mapping through its userfaultfd, 2 MiB ones by its own thread, "
     "late ones included (charged to the client)"},
    {"client_fallbacks", &RegionStats::clientFallbacks, "pages",
     "a client's pages installed through npfd's mapping instead (charged to npfd): its installer was late, slow or "
     "refused"},
    {"client_late", &RegionStats::clientLate, "jobs",
     "installs into the client's mapping that missed their deadline: not started in time, held up in the client's mm or cgroup, or (2 MiB) not answered by its thread"},
    {"client_slow", &RegionStats::clientSlow, "jobs",
     "installs into the client's mapping that ended in time but after half their deadline: past four deadlines of such "
     "time (earned back at 2 % of the time), the client got no more for a while (100 ms, doubling to 3.2 s while it "
     "stays slow or late), its pages went through npfd's mapping"},
    {"fast_path_faults", &RegionStats::fastPathFaults, "datagrams",
     "a client's region: a worker's store found its page gone from npfd's mapping (punched by the client, or "
     "installed by the client's thread and not mapped yet): handed to the pager"},
    {"fast_path_faults_in_grace", &RegionStats::fastPathFaultsInGrace, "datagrams",
     "of fast_path_faults: while a grace period waited for the workers (a worker that waited on such a fault "
     "would have held that grace period, and the pager in it, for ever)"},
    {"grace_timeouts", &RegionStats::graceTimeouts, "evictions",
     "grace periods that outlasted their bound (a worker held its epoch): the victims stayed resident, eviction "
     "tries again later"},
    {"protect_capped", &RegionStats::protectCapped, "buffers",
     "posted buffers left unprotected from eviction: protecting them would have held more pages than the resident "
     "budget leaves (their pages may be evicted before their datagram comes; the fault path places it)"},
    {"reserve_freed", &RegionStats::reserveFreed, "pages",
     "pages of the region's reserve (anonymous memory) freed just before an install copied as many in, so that "
     "it took recycled pages instead of fresh ones"},
}};
static_assert(counters_detail::wellFormed(kRegionCounters) && counters_detail::unitsNamed(kRegionCounters),
              "kRegionCounters: names snake_case and unique, each member once");
static_assert(sizeof(RegionStats) == (kRegionCounters.size() + 1) * sizeof(uint64_t),
              "kRegionCounters must list every field of RegionStats but residentPages");

using RegionCounters = Tally<kRegionCounters>;

} // namespace npf
