#include "daemon/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "counters/flow_stats.h"
#include "daemon/metrics_server.h"
#include "ipc/protocol.h"
#include "npf/version.h"
#include "sys/error.h"
#include "sys/log.h"

namespace npf::daemon {
namespace {

// The quantiles of EngineStats::Latency; max is quantile 1. With count they
// are every field of kLatencyFields.
struct QuantileOf {
    double q;
    uint64_t EngineStats::Latency::*member;
};
constexpr QuantileOf kQuantiles[] = {
    {0.5, &EngineStats::Latency::p50},
    {0.99, &EngineStats::Latency::p99},
    {0.999, &EngineStats::Latency::p999},
    {1.0, &EngineStats::Latency::max},
};
static_assert(std::size(kQuantiles) + 1 == kLatencyFields.size(), "a field of EngineStats::Latency is not exported");

prometheus::ClientMetric labelled(const std::string& iface)
{
    prometheus::ClientMetric m;
    m.label.push_back({"iface", iface});
    return m;
}

// A family per entry of a counter table, a series per interface.
template <typename Table, typename Stats>
void addFamilies(std::vector<prometheus::MetricFamily>& out, const Table& table, const char* prefix,
                 const std::vector<IfaceStats>& ifaces, Stats IfaceStats::*stats)
{
    for (const CounterDef<Stats>& c : table) {
        prometheus::MetricFamily f{prometheusName(c, prefix), std::string(c.help) + " (" + c.unit + ")",
                                   c.gauge ? prometheus::MetricType::Gauge : prometheus::MetricType::Counter, {}};
        for (const IfaceStats& s : ifaces) {
            prometheus::ClientMetric m = labelled(s.iface);
            (c.gauge ? m.gauge.value : m.counter.value) = double(s.*stats.*c.member);
            f.metric.push_back(std::move(m));
        }
        out.push_back(std::move(f));
    }
}

} // namespace

std::string prometheusXdpName(const char* statName)
{
    const std::string_view n(statName);
    return "npf_xdp_" + std::string(n) + (n.ends_with("_total") ? "" : "_total");
}

std::string prometheusLatencyName(const LatencyDef& l) { return std::string("npf_latency_") + l.name + "_seconds"; }

namespace {

void addXdpFamilies(std::vector<prometheus::MetricFamily>& out, const std::vector<IfaceStats>& snapshot)
{
    for (size_t i = 0; i < std::size(dataplane::kStatNames); i++) {
        prometheus::MetricFamily f{prometheusXdpName(dataplane::kStatNames[i]),
                                   std::string("XDP: ") + dataplane::kStatHelp[i] + " (packets, all CPUs)",
                                   prometheus::MetricType::Counter,
                                   {}};
        for (const IfaceStats& s : snapshot) {
            prometheus::ClientMetric m = labelled(s.iface);
            m.counter.value = double(s.xdp[i]);
            f.metric.push_back(std::move(m));
        }
        out.push_back(std::move(f));
    }
}

// Summaries: EngineStats carries the quantiles of each histogram, not its
// buckets or sum; _sum is NaN (unknown), not a made-up 0.
void addLatencyFamilies(std::vector<prometheus::MetricFamily>& out, const std::vector<IfaceStats>& snapshot)
{
    for (const LatencyDef& l : kEngineLatencies) {
        prometheus::MetricFamily f{prometheusLatencyName(l),
                                   std::string(l.help) + " (quantile 1 is the maximum; _sum unknown: NaN)",
                                   prometheus::MetricType::Summary,
                                   {}};
        for (const IfaceStats& s : snapshot) {
            const EngineStats::Latency& h = s.engine.*l.member;
            prometheus::ClientMetric m = labelled(s.iface);
            m.summary.sample_count = h.count;
            m.summary.sample_sum = std::numeric_limits<double>::quiet_NaN();
            for (const QuantileOf& q : kQuantiles)
                m.summary.quantile.push_back({q.q, double(h.*q.member) / 1e9});
            f.metric.push_back(std::move(m));
        }
        out.push_back(std::move(f));
    }
}

// npf_build_info: npfd's version, the library ABI it was built with and the
// protocols it speaks (what a rolling update needs to know), as labels of a
// constant 1.
prometheus::MetricFamily buildInfo()
{
    prometheus::MetricFamily f{"npf_build_info",
                               "npfd's version, library ABI and the protocols it serves (oldest_protocol to "
                               "protocol), as labels; always 1",
                               prometheus::MetricType::Gauge,
                               {}};
    prometheus::ClientMetric& m = f.metric.emplace_back();
    m.label = {{"version", NPF_VERSION_STRING},
               {"abi", std::to_string(NPF_ABI_VERSION)},
               {"protocol", std::to_string(ipc::kProtocolVersion)},
               {"oldest_protocol", std::to_string(ipc::kOldestProtocol)}};
    m.gauge.value = 1;
    return f;
}

// Per open flow of a client: a series per status or reason.
void addFlowFamilies(std::vector<prometheus::MetricFamily>& out, const std::vector<ClientFlow>& flows)
{
    auto perFlow = [&](const char* name, const char* help, const char* label, auto values) {
        prometheus::MetricFamily f{name, help, prometheus::MetricType::Counter, {}};
        for (const ClientFlow& fl : flows)
            for (const auto& [what, value] : values(fl.stats)) {
                prometheus::ClientMetric m = labelled(fl.iface);
                m.label.push_back({"port", std::to_string(fl.port)});
                m.label.push_back({"client", fl.client});
                m.label.push_back({"uid", std::to_string(fl.uid)});
                m.label.push_back({label, what});
                m.counter.value = double(value);
                f.metric.push_back(std::move(m));
            }
        out.push_back(std::move(f));
    };
    using Values = std::vector<std::pair<std::string, uint64_t>>;
    auto xdp = [](const FlowStats& s, counters::FlowOutcomes which) {
        Values v;
        for (const auto& [name, n] : counters::flowOutcomes(s, which))
            v.emplace_back(name, n);
        return v;
    };
    perFlow("npf_flow_completed_total", "completions of an npfd client's open flow, by status (completions)",
            "status", [](const FlowStats& s) {
                return Values{{"ok", s.completedOk},
                              {"truncated", s.completedTruncated},
                              {"lost", s.completedLost},
                              {"bad_csum", s.completedBadCsum}};
            });
    perFlow("npf_flow_dropped_total",
            "datagrams of an npfd client's open flow dropped, by reason: XDP's drop_* and redir_fail (npf_xdp_*), "
            "socket: by the kernel at the AF_XDP socket (datagrams)",
            "reason", [&](const FlowStats& s) {
                Values v = xdp(s, counters::FlowOutcomes::Dropped);
                v.emplace_back("socket", s.socketDropped());
                return v;
            });
    perFlow("npf_flow_passed_total",
            "datagrams of an npfd client's open flow XDP passed to the kernel untouched, by reason (datagrams)",
            "reason", [&](const FlowStats& s) {
                return xdp(s, counters::FlowOutcomes::Passed);
            });
    perFlow("npf_flow_credits_total",
            "credit messages to the sender of an npfd client's open flow (opened with credits; brokered: npfd "
            "sends them): sent, withheld by the bound, waits: sent after the sender had used up its grant (messages)",
            "kind", [](const FlowStats& s) {
                return Values{{"sent", s.creditsSent}, {"withheld", s.creditsWithheld}, {"waits", s.creditWaits}};
            });
}

} // namespace

std::vector<prometheus::MetricFamily> metricFamilies(const Snapshot& all)
{
    std::vector<prometheus::MetricFamily> out;
    addFamilies(out, kEngineCounters, "npf_", all.ifaces, &IfaceStats::engine);
    addFamilies(out, kRegionCounters, "npf_region_", all.ifaces, &IfaceStats::region);
    addXdpFamilies(out, all.ifaces);
    addLatencyFamilies(out, all.ifaces);
    prometheus::MetricFamily clients{"npf_clients", "npfd clients connected (clients)", prometheus::MetricType::Gauge,
                                     {}};
    clients.metric.emplace_back().gauge.value = double(all.clients);
    out.push_back(std::move(clients));
    prometheus::MetricFamily pods{"npf_pods", "pods npf-cni handed npfd whose listeners npfd holds (pods)",
                                  prometheus::MetricType::Gauge, {}};
    pods.metric.emplace_back().gauge.value = double(all.pods);
    out.push_back(std::move(pods));
    out.push_back(buildInfo());
    addFlowFamilies(out, all.flows);
    return out;
}

// The families prometheus-cpp's Exposer added about itself, kept so a
// scrape carries what it always did: scrapes served, body bytes sent
// (compressed, when they were), and the time from request to response
// handed to the kernel, in microseconds.
struct MetricsExporter::State {
    explicit State(Source s) : source(std::move(s)) {}

    std::string render()
    {
        std::vector<prometheus::MetricFamily> families = registry.Collect();
        try {
            std::vector<prometheus::MetricFamily> npf = metricFamilies(source());
            families.insert(families.end(), std::make_move_iterator(npf.begin()), std::make_move_iterator(npf.end()));
        } catch (const std::exception& e) { // a scrape without npf's families, not a dead exporter
            NPF_WARN_RL("npfd: metrics: %s", e.what());
        }
        return prometheus::TextSerializer().Serialize(families);
    }
    void replied(size_t bytes, std::chrono::nanoseconds took)
    {
        transferred.Increment(double(bytes));
        scrapes.Increment();
        latencies.Observe(double(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
    }

    Source source;
    prometheus::Registry registry;
    prometheus::Counter& transferred = prometheus::BuildCounter()
                                           .Name("exposer_transferred_bytes_total")
                                           .Help("Transferred bytes to metrics services")
                                           .Register(registry)
                                           .Add({});
    prometheus::Counter& scrapes = prometheus::BuildCounter()
                                       .Name("exposer_scrapes_total")
                                       .Help("Number of times metrics were scraped")
                                       .Register(registry)
                                       .Add({});
    prometheus::Summary& latencies =
        prometheus::BuildSummary()
            .Name("exposer_request_latencies")
            .Help("Latencies of serving scrape requests, in microseconds")
            .Register(registry)
            .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}});
};

MetricsExporter::MetricsExporter(const std::string& address, Source snapshot, std::vector<HttpRoute> more)
    : state_(std::make_unique<State>(std::move(snapshot)))
{
    State* st = state_.get();
    std::vector<HttpRoute> routes = {{"/metrics", [st] { return HttpPage{200, st->render()}; }, true}};
    routes.insert(routes.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    server_ = serveHttp("--metrics", address, std::move(routes),
                        [st](size_t bytes, std::chrono::nanoseconds took) { st->replied(bytes, took); });
    NPF_INFO("npfd: Prometheus metrics on http://%s/metrics", address.c_str());
}

MetricsExporter::~MetricsExporter() = default;

std::vector<int> MetricsExporter::ports() const { return server_->ports(); }

} // namespace npf::daemon
