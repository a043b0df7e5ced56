#include "daemon/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string_view>

#include "ctl/errors.h"
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

class TableCollectable : public prometheus::Collectable {
public:
    explicit TableCollectable(MetricsExporter::Source s) : snapshot_(std::move(s)) {}
    std::vector<prometheus::MetricFamily> Collect() const override
    {
        try {
            return metricFamilies(snapshot_());
        } catch (const std::exception& e) { // an empty scrape, not a dead exporter thread
            NPF_WARN_RL("npfd: metrics: %s", e.what());
            return {};
        }
    }

private:
    MetricsExporter::Source snapshot_;
};

} // namespace

// As civetweb's listening_ports takes it.
void checkMetricsAddress(const std::string& a)
{
    const size_t colon = a.rfind(':');
    const std::string host = colon == std::string::npos ? "" : a.substr(0, colon);
    const std::string port = colon == std::string::npos ? a : a.substr(colon + 1);
    char* end = nullptr;
    const unsigned long p = port.empty() ? 0 : std::strtoul(port.c_str(), &end, 10);
    const bool portOk = !port.empty() && *end == '\0' && port.find_first_not_of("0123456789") == std::string::npos &&
                        p >= 1 && p <= 65535;
    const bool v6 = host.size() > 2 && host.front() == '[' && host.back() == ']';
    const bool hostOk = colon == std::string::npos || v6 || (!host.empty() && host.find(':') == std::string::npos);
    if (!portOk || !hostOk)
        throw ctl::ArgumentError("--metrics " + a + ": expected ADDR:PORT (127.0.0.1:9100, [::1]:9100) or PORT");
}

std::string prometheusName(const CounterDef<EngineStats>& c)
{
    return std::string("npf_") + c.name + (c.gauge ? "" : "_total");
}

std::string prometheusXdpName(const char* statName)
{
    const std::string_view n(statName);
    return "npf_xdp_" + std::string(n) + (n.ends_with("_total") ? "" : "_total");
}

std::string prometheusLatencyName(const LatencyDef& l) { return std::string("npf_latency_") + l.name + "_seconds"; }

std::vector<prometheus::MetricFamily> metricFamilies(const Snapshot& all)
{
    const std::vector<IfaceStats>& snapshot = all.ifaces;
    std::vector<prometheus::MetricFamily> out;
    for (const CounterDef<EngineStats>& c : kEngineCounters) {
        prometheus::MetricFamily f{prometheusName(c), std::string(c.help) + " (" + c.unit + ")",
                                   c.gauge ? prometheus::MetricType::Gauge : prometheus::MetricType::Counter, {}};
        for (const IfaceStats& s : snapshot) {
            prometheus::ClientMetric m = labelled(s.iface);
            (c.gauge ? m.gauge.value : m.counter.value) = double(s.engine.*c.member);
            f.metric.push_back(std::move(m));
        }
        out.push_back(std::move(f));
    }
    for (size_t i = 0; i < std::size(ctl::kStatNames); i++) {
        prometheus::MetricFamily f{prometheusXdpName(ctl::kStatNames[i]),
                                   std::string("XDP program: packets counted as ") + ctl::kStatNames[i] +
                                       " (enum npf_stat), summed over all CPUs",
                                   prometheus::MetricType::Counter,
                                   {}};
        for (const IfaceStats& s : snapshot) {
            prometheus::ClientMetric m = labelled(s.iface);
            m.counter.value = double(s.xdp[i]);
            f.metric.push_back(std::move(m));
        }
        out.push_back(std::move(f));
    }
    // Summaries: EngineStats carries the quantiles of each histogram, not its
    // buckets or sum; _sum is NaN (unknown), not a made-up 0.
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
    prometheus::MetricFamily clients{"npf_clients", "npfd clients connected (clients)", prometheus::MetricType::Gauge,
                                     {}};
    clients.metric.emplace_back().gauge.value = double(all.clients);
    out.push_back(std::move(clients));
    prometheus::MetricFamily flows{"npf_flow_completed_total",
                                   "completions of an npfd client's open flow, by status (completions)",
                                   prometheus::MetricType::Counter,
                                   {}};
    for (const FlowStats& fl : all.flows)
        for (const auto& [status, value] : {std::pair<const char*, uint64_t>{"ok", fl.ok},
                                            {"truncated", fl.truncated},
                                            {"lost", fl.lost},
                                            {"bad_csum", fl.badCsum}}) {
            prometheus::ClientMetric m = labelled(fl.iface);
            m.label.push_back({"port", std::to_string(fl.port)});
            m.label.push_back({"client", fl.client});
            m.label.push_back({"uid", std::to_string(fl.uid)});
            m.label.push_back({"status", status});
            m.counter.value = double(value);
            flows.metric.push_back(std::move(m));
        }
    out.push_back(std::move(flows));
    return out;
}

MetricsExporter::MetricsExporter(const std::string& address, Source snapshot)
    : collectable_(std::make_shared<TableCollectable>(std::move(snapshot)))
{
    checkMetricsAddress(address);
    try {
        exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
    } catch (const std::exception& e) {
        throw ctl::Error(EADDRNOTAVAIL, "--metrics " + address + ": cannot listen there (" + e.what() +
                                            "): is the port in use, or the address not one of this host's?");
    }
    exposer_->RegisterCollectable(collectable_);
    NPF_INFO("npfd: Prometheus metrics on http://%s/metrics", address.c_str());
}

MetricsExporter::~MetricsExporter() = default;

std::vector<int> MetricsExporter::ports() const { return exposer_->GetListeningPorts(); }

} // namespace npf::daemon
