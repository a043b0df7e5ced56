// One definition per counter: a table names each counter of a stats struct
// once, with its unit and help line, and a static_assert ties the table to
// the struct (like enum npf_stat and dataplane::kStatNames). Everything that shows
// counters loops over a table, and so does every thread that counts (it
// keeps one atomic per table entry and the snapshot sums them): the engine's
// JSON snapshot, `npfctl stats`, npf-recv's summary, Prometheus, and
// docs/cli.md "Counters" (checked by a test).
//
// Names map to Prometheus mechanically: npf_<name>, plus _total unless the
// counter is a gauge. A counter in bytes ends its name in _bytes; other
// units (datagrams, pages, ...) are counts and stay out of the name, as in
// node_network_receive_packets_total. Latencies are ns here (ns in the JSON
// keys as well); an exporter divides by 1e9 for _seconds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "npf/stats.h"

namespace npf {

// One counter of `Stats`: a uint64_t field of it.
template <typename S>
struct CounterDef {
    using Stats = S;
    const char* name;         // snake_case: JSON key, `npfctl stats` row, Prometheus npf_<name>[_total]
    uint64_t Stats::*member;
    const char* unit;         // what one count is: "datagrams", "pages", "bytes", ...
    const char* help;         // one line
    bool gauge = false;       // a level now (goes down too); otherwise monotonic since start
};

// EngineStats's counters, in the order of the JSON snapshot's "counters".
inline constexpr std::array<CounterDef<EngineStats>, 29> kEngineCounters = {{
    {"fast_path", &EngineStats::fastPath, "datagrams", "placed by a queue worker (destination page resident)"},
    {"fault_path", &EngineStats::faultPath, "datagrams", "placed by the pager (backup ring, or deferred)"},
    {"deferred", &EngineStats::deferred, "datagrams",
     "taken from a primary ring after their page was evicted, handed to the pager"},
    {"bad_meta", &EngineStats::badMeta, "frames", "dropped by meta validation"},
    {"rejected", &EngineStats::rejected, "datagrams",
     "seq rejected by the sequencer (duplicate, stale, out of window)"},
    {"mismatch", &EngineStats::mismatch, "datagrams", "meta disagrees with the posted buffer (completed LOST)"},
    {"place_errors", &EngineStats::placeErrors, "datagrams", "payload the pager could not place (completed LOST)"},
    {"fault_drops", &EngineStats::faultDrops, "datagrams",
     "dropped on a non-resident page under FaultPolicy::Drop (completed LOST)"},
    {"defer_drops", &EngineStats::deferDrops, "datagrams",
     "page evicted after steering while the pager's deferred queue was full (completed LOST)"},
    {"csum_errors", &EngineStats::csumErrors, "datagrams", "wrong UDP checksum (completed BAD_CSUM)"},
    {"late", &EngineStats::late, "datagrams", "arrived after their seq completed LOST (dropped)"},
    {"completed_ok", &EngineStats::completedOk, "completions", "seqs completed OK"},
    {"completed_truncated", &EngineStats::completedTruncated, "completions",
     "seqs completed TRUNCATED (datagram longer than its buffer)"},
    {"completed_lost", &EngineStats::completedLost, "completions", "seqs completed LOST"},
    {"completed_bad_csum", &EngineStats::completedBadCsum, "completions", "seqs completed BAD_CSUM"},
    {"cpu_faults", &EngineStats::cpuFaults, "faults", "CPU page faults on the regions served by the pager (an npfd client's own included)"},
    {"packet_faults", &EngineStats::packetFaults, "pages", "pages installed for datagrams (fault path)"},
    {"prefetched", &EngineStats::prefetched, "pages", "pages installed ahead of posted buffers after a fault"},
    {"evicted", &EngineStats::evicted, "pages", "pages evicted from the region"},
    {"restored", &EngineStats::restored, "pages", "pages installed from saved (evicted) content"},
    {"resident_pages", &EngineStats::residentPages, "pages", "4 KiB pages of the regions resident now (a 2 MiB page counts 512)", true},
    {"pinned_bytes", &EngineStats::pinnedBytes, "bytes", "UMEM bytes pinned, all queues", true},
    {"kernel_rx_dropped", &EngineStats::kernelRxDropped, "packets",
     "dropped by the kernel at the AF_XDP sockets (rx_dropped + rx_ring_full)"},
    {"fault_batches_1", &EngineStats::faultBatches1, "batches", "fault-path batches of 1 datagram (backup ring or deferred)"},
    {"fault_batches_2_3", &EngineStats::faultBatches2To3, "batches", "fault-path batches of 2-3 datagrams"},
    {"fault_batches_4_7", &EngineStats::faultBatches4To7, "batches", "fault-path batches of 4-7 datagrams"},
    {"fault_batches_8_15", &EngineStats::faultBatches8To15, "batches", "fault-path batches of 8-15 datagrams"},
    {"fault_batches_16_31", &EngineStats::faultBatches16To31, "batches", "fault-path batches of 16-31 datagrams"},
    {"fault_batches_32_up", &EngineStats::faultBatches32Up, "batches", "fault-path batches of 32 datagrams or more"},
}};

// FlowStats's counters besides its XDP outcomes (those are named by enum
// npf_stat: dataplane::kStatNames), in the order of its JSON form.
inline constexpr std::array<CounterDef<FlowStats>, 12> kFlowCounters = {{
    {"completed_ok", &FlowStats::completedOk, "completions", "seqs completed OK"},
    {"completed_truncated", &FlowStats::completedTruncated, "completions",
     "seqs completed TRUNCATED (datagram longer than its buffer)"},
    {"completed_bad_csum", &FlowStats::completedBadCsum, "completions", "seqs completed BAD_CSUM"},
    {"completed_lost", &FlowStats::completedLost, "completions", "seqs completed LOST"},
    {"lost_unarrived", &FlowStats::lostUnarrived, "completions",
     "of completed_lost: the datagram never reached the service (dropped by XDP after its claim, or by the kernel at the AF_XDP socket)"},
    {"in_flight", &FlowStats::inFlight, "seqs", "claimed by XDP, not completed yet", true},
    {"late", &FlowStats::late, "datagrams", "arrived after their seq completed LOST (dropped; the seq is counted LOST)"},
    {"rejected", &FlowStats::rejected, "datagrams", "refused as no seq of the flow's window (duplicate, out of window)"},
    {"credits_sent", &FlowStats::creditsSent, "messages", "credit messages sent to the flow's sender"},
    {"credits_withheld", &FlowStats::creditsWithheld, "messages",
     "credit messages due but not sent: at most one per NPF_CREDIT_EVERY datagrams received, and the engine's total"},
    {"credit_waits", &FlowStats::creditWaits, "messages",
     "credit messages sent when the sender had used up its last grant (it was held back)"},
    {"credit_limit", &FlowStats::creditLimit, "datagrams", "the grant last sent: the sender may send its datagrams below it", true},
}};

// One latency histogram of EngineStats (unit ns).
struct LatencyDef {
    const char* name; // JSON key under "latency"; `npfctl stats` rows latency.<name>_<quantile>
    EngineStats::Latency EngineStats::*member;
    const char* help;
};

// The fault path's stages are per datagram and add up to fault_total:
// steer_to_pickup + pickup_to_image + image_to_copy + copy_to_complete +
// fault_complete_to_publish (complete_to_publish: every completion, fast path too).
inline constexpr std::array<LatencyDef, 8> kEngineLatencies = {{
    {"steer_to_pickup", &EngineStats::steerToPickup, "fault path: steered by XDP -> picked up by the pager"},
    {"pickup_to_image", &EngineStats::pickupToImage, "fault path: picked up -> its page image ready"},
    {"image_to_copy", &EngineStats::imageToCopy, "fault path: its page image ready -> UFFDIO_COPY done"},
    {"complete_to_publish", &EngineStats::completeToPublish,
     "seq complete -> completion published (every completion)"},
    {"fault_total", &EngineStats::faultTotal, "fault path: steered by XDP -> completion published"},
    {"fast_total", &EngineStats::fastTotal, "fast path: steered by XDP -> placed by a worker"},
    {"copy_to_complete", &EngineStats::copyToComplete, "fault path: its UFFDIO_COPY done -> its seq completed"},
    {"fault_complete_to_publish", &EngineStats::faultCompleteToPublish,
     "fault path: its seq completed -> its completion published"},
}};

// The fault path's stages of a datagram in order, then their total (the
// first five add up to it): what the pager measures, and how npf-bench's
// fault-path table lists them (names: kEngineLatencies).
inline constexpr std::array<EngineStats::Latency EngineStats::*, 6> kFaultStages = {
    &EngineStats::steerToPickup,  &EngineStats::pickupToImage,          &EngineStats::imageToCopy,
    &EngineStats::copyToComplete, &EngineStats::faultCompleteToPublish, &EngineStats::faultTotal};

// The fields of one histogram, as JSON keys.
struct QuantileDef {
    const char* name;
    uint64_t EngineStats::Latency::*member;
};

inline constexpr std::array<QuantileDef, 5> kLatencyFields = {{
    {"count", &EngineStats::Latency::count},
    {"p50_ns", &EngineStats::Latency::p50},
    {"p99_ns", &EngineStats::Latency::p99},
    {"p999_ns", &EngineStats::Latency::p999},
    {"max_ns", &EngineStats::Latency::max},
}};

namespace counters_detail {

constexpr bool snakeCase(std::string_view s)
{
    if (s.empty() || s.front() < 'a' || s.front() > 'z' || s.back() == '_')
        return false;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok || (c == '_' && s[i + 1] == '_'))
            return false;
    }
    return true;
}

// Every name snake_case and unique, every member listed once.
template <typename Table>
constexpr bool wellFormed(const Table& t)
{
    for (size_t i = 0; i < t.size(); ++i) {
        if (!snakeCase(t[i].name) || t[i].member == nullptr)
            return false;
        for (size_t k = 0; k < i; ++k)
            if (std::string_view(t[i].name) == t[k].name || t[i].member == t[k].member)
                return false;
    }
    return true;
}

// Prometheus: a byte count says so in its name.
template <typename Table>
constexpr bool unitsNamed(const Table& t)
{
    for (const auto& c : t)
        if ((std::string_view(c.unit) == "bytes") != std::string_view(c.name).ends_with("_bytes"))
            return false;
    return true;
}

} // namespace counters_detail

// Distinct members and a size that leaves no room for an unlisted one: a new
// EngineStats field fails here until it has a table entry.
static_assert(counters_detail::wellFormed(kEngineCounters) && counters_detail::unitsNamed(kEngineCounters),
              "kEngineCounters: names snake_case and unique, each member once, _bytes names for bytes");
static_assert(counters_detail::wellFormed(kEngineLatencies) && counters_detail::wellFormed(kLatencyFields));
static_assert(counters_detail::wellFormed(kFlowCounters) && counters_detail::unitsNamed(kFlowCounters));
static_assert(sizeof(FlowStats) == (kFlowCounters.size() + NPF_FLOW_STAT_MAX) * sizeof(uint64_t),
              "kFlowCounters must list every counter of FlowStats besides xdp");
static_assert(sizeof(EngineStats::Latency) == kLatencyFields.size() * sizeof(uint64_t),
              "kLatencyFields must list every field of EngineStats::Latency");
static_assert(sizeof(EngineStats) == kEngineCounters.size() * sizeof(uint64_t) +
                                         kEngineLatencies.size() * sizeof(EngineStats::Latency),
              "kEngineCounters and kEngineLatencies must list every field of EngineStats");

// to += from, counter by counter, for the counters of `table`.
template <typename Table, typename Stats>
constexpr void addCounters(const Table& table, Stats& to, const Stats& from) noexcept
{
    for (const auto& c : table)
        to.*c.member += from.*c.member;
}

// The table entry of an EngineStats member (a compile error in a constant
// expression when the member has none).
constexpr const CounterDef<EngineStats>& counterDef(uint64_t EngineStats::*m)
{
    for (const auto& c : kEngineCounters)
        if (c.member == m)
            return c;
    throw "EngineStats member missing from kEngineCounters";
}

// The counters as text and JSON, named by the tables above (what npf-recv's
// exit summary prints).

// {"counters": {<kEngineCounters name>: n, ...},
//  "latency": {<kEngineLatencies name>: {"count", "p50_ns", "p99_ns", "p999_ns", "max_ns"}, ...}}:
// the members of Engine::statsJson()'s object that EngineStats holds.
std::string toJson(const EngineStats& s);
// {"xdp": {<npf_stat name>: n, ... every outcome of a flow, from NPF_STAT_FLOW_FIRST on},
//  <kFlowCounters name>: n, ...,
//  "reached", "passed", "dropped_in_xdp", "claimed", "socket_dropped": FlowStats's sums}
std::string toJson(const FlowStats& s);
// "fast_path=1 fault_path=2": the named counters of `s`, in the order given.
std::string formatCounters(const EngineStats& s, std::initializer_list<uint64_t EngineStats::*> which);
// The flow's XDP outcomes that are not 0, by name in enum order:
// "drop_rnr=3 redir_primary=9" ("" when none).
std::string formatXdpOutcomes(const FlowStats& s);

} // namespace npf
