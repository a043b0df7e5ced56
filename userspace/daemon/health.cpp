#include "daemon/health.h"

#include "sys/clock.h"

namespace npf::daemon {

Health::Health(std::chrono::milliseconds stallLimit, Source source)
    : source_(std::move(source)), detector_(stallLimit)
{
}

std::string Health::stalled()
{
    std::vector<LoopProgress> loops = source_.dataplaneLoops();
    loops.insert(loops.begin(), {"control loop", beats_.load()});
    std::lock_guard<std::mutex> lock(mu_);
    const std::string why = detector_.observe(loops, monotonicNs());
    if (why.empty())
        return why;
    return why + " (stall limit " + formatSeconds(uint64_t(detector_.limit().count())) + ")";
}

HttpPage Health::healthz()
{
    switch (phase_.load(std::memory_order_acquire)) {
    case Phase::Starting: return {200, "alive: starting\n"};
    case Phase::Stopping: return {200, "alive: stopping\n"};
    case Phase::Serving: break;
    }
    if (std::string why = stalled(); !why.empty())
        return {503, "stalled: " + why + "\n"};
    return {200, "alive\n"};
}

HttpPage Health::readyz()
{
    switch (phase_.load(std::memory_order_acquire)) {
    case Phase::Starting: return {503, "not ready: starting (attaching interfaces, binding sockets)\n"};
    case Phase::Stopping: return {503, "not ready: stopping\n"};
    case Phase::Serving: break;
    }
    if (std::string why = stalled(); !why.empty())
        return {503, "not ready: stalled: " + why + "\n"};
    std::string why;
    for (const std::string& w : source_.notServed())
        why += (why.empty() ? "" : "; ") + w;
    if (!why.empty())
        return {503, "not ready: " + why + "\n"};
    return {200, "ready: serving " + source_.describe() + "\n"};
}

std::vector<HttpRoute> Health::routes()
{
    return {{"/healthz", [this] { return healthz(); }}, {"/readyz", [this] { return readyz(); }}};
}

} // namespace npf::daemon
