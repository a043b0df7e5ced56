// npfd's Prometheus exporter (`npfd --metrics ADDR:PORT`, docs/cli.md): a
// pull endpoint (GET /metrics on npfd's own HTTP server, metrics_server.h:
// one thread, deadlines and a connection cap, so no peer can starve it)
// that builds every family from the counter tables at scrape time and
// writes them with prometheus-cpp's TextSerializer:
// kEngineCounters as npf_<name>[_total], kRegionCounters (its clients'
// regions) as npf_region_<name>_total, dataplane::kStatNames as
// npf_xdp_<name>_total, kEngineLatencies as summaries
// npf_latency_<name>_seconds, each with one series per interface (label
// `iface`); npf_build_info (version, ABI, protocols); per client,
// npf_clients, npf_pods, and per open flow of a client
// npf_flow_completed_total (labels iface, port, client, uid, status),
// npf_flow_dropped_total and npf_flow_passed_total (the same labels with
// reason instead of status). No state of its own: nothing goes stale,
// nothing is copied.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/metrics_server.h"
#include "dataplane/stats.h"
#include "npf/counters.h"
#include "npf/stats.h"
#include "region/region_stats.h"

namespace prometheus {
struct MetricFamily;
} // namespace prometheus

namespace npf::daemon {

// What one interface's Service counts, read at one moment.
struct IfaceStats {
    std::string iface;
    EngineStats engine;
    RegionStats region; // its regions', added up
    dataplane::XdpStats xdp{};
};

// One open flow of an npfd client: its accounting (Service::flowStats),
// labelled with the interface, the port and the client (its hello name, and
// uid). A few series per open flow (by status, by reason): bounded by the
// flows npfd allows, gone when the flow closes.
struct ClientFlow {
    std::string iface;
    uint16_t port = 0;
    std::string client;
    uint32_t uid = 0;
    FlowStats stats;
};

// Everything one scrape reports.
struct Snapshot {
    std::vector<IfaceStats> ifaces;
    std::vector<ClientFlow> flows;
    uint64_t clients = 0; // connected
    uint64_t pods = 0;    // pods' listeners held (pods_socket)
};

// <prefix><name>, plus _total unless the entry is a gauge
// (include/npf/counters.h): npf_<name> for EngineStats, npf_region_<name>
// for RegionStats.
template <typename S>
std::string prometheusName(const CounterDef<S>& c, const char* prefix = "npf_")
{
    return std::string(prefix) + c.name + (c.gauge ? "" : "_total");
}
// npf_xdp_<name>_total; a name that already ends in _total keeps one
// (rx_total -> npf_xdp_rx_total).
std::string prometheusXdpName(const char* statName);
// npf_latency_<name>_seconds
std::string prometheusLatencyName(const LatencyDef& l);

// The families of a snapshot, in table order: engine counters, region
// counters, XDP counters, latency summaries; then npf_clients,
// npf_build_info, npf_flow_completed_total, npf_flow_dropped_total and
// npf_flow_passed_total.
std::vector<prometheus::MetricFamily> metricFamilies(const Snapshot& snapshot);

class MetricsExporter {
public:
    // Called once per scrape, on the exporter's thread.
    using Source = std::function<Snapshot()>;

    // Listens on `address` ("127.0.0.1:9100", "[::1]:9100", "9100" = every
    // IPv4 address) and serves /metrics there, and `more` (npfd's probes);
    // throws as serveHttp (metrics_server.h).
    MetricsExporter(const std::string& address, Source snapshot, std::vector<HttpRoute> more = {});
    ~MetricsExporter(); // stops serving: no scrape runs after it returns
    MetricsExporter(const MetricsExporter&) = delete;
    MetricsExporter& operator=(const MetricsExporter&) = delete;

    std::vector<int> ports() const;

private:
    struct State; // the source and the exporter's own exposer_* families
    std::unique_ptr<State> state_;
    std::unique_ptr<MetricsServer> server_; // after state_: stops first
};

} // namespace npf::daemon
