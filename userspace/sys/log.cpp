#include "sys/log.h"

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <utility>

namespace npf::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::Info)};
std::mutex g_out;
Sink g_sink; // empty: stderr; guarded by g_out

} // namespace

void vwrite(Level l, const char* fmt, va_list ap) noexcept
{
    char buf[1024];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    if (n < 0)
        return;
    size_t len = static_cast<size_t>(n) < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf) - 1;
    while (len > 0 && buf[len - 1] == '\n')
        buf[--len] = '\0';
    std::lock_guard<std::mutex> lock(g_out);
    if (!g_sink) {
        fprintf(stderr, "npf: %s: %s\n", levelName(l), buf);
        return;
    }
    try {
        g_sink(l, std::string_view(buf, len));
    } catch (...) {
        // the sink's problem; the line is dropped (see npf/log.h)
    }
}

const char* levelName(Level l) noexcept
{
    switch (l) {
    case Level::Error: return "error";
    case Level::Warn: return "warning";
    case Level::Info: return "info";
    case Level::Debug: return "debug";
    case Level::Trace: return "trace";
    }
    return "?";
}

void setSink(Sink sink)
{
    std::lock_guard<std::mutex> lock(g_out);
    g_sink = std::move(sink);
}

void setLevel(Level l) noexcept { g_level.store(static_cast<int>(l), std::memory_order_relaxed); }

Level level() noexcept { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

void setVerbosity(int v, Level base) noexcept
{
    int l = static_cast<int>(base) + v;
    if (l > static_cast<int>(Level::Trace))
        l = static_cast<int>(Level::Trace);
    setLevel(static_cast<Level>(l));
}

void write(Level l, const char* fmt, ...) noexcept
{
    va_list ap;
    va_start(ap, fmt);
    vwrite(l, fmt, ap);
    va_end(ap);
}

bool RateLimit::allow(uint64_t* suppressed) noexcept
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int64_t now = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    int64_t start = windowStart_.load(std::memory_order_relaxed);
    if (now - start >= periodNs_ && windowStart_.compare_exchange_strong(start, now)) {
        used_.store(0, std::memory_order_relaxed);
        *suppressed = dropped_.exchange(0, std::memory_order_relaxed);
    }
    if (used_.fetch_add(1, std::memory_order_relaxed) < burst_)
        return true;
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
}

} // namespace npf::log
