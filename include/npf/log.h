// libnpf's logger: levels, printf-style with format checking, a verbosity
// raised by each -v, libbpf/libxdp output routed through it, and a rate limit
// for anything logged per packet or per fault. Lines go to stderr as
// "npf: <level>: <text>" unless the application installs a sink.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

namespace npf::log {

enum class Level { Error = 0, Warn = 1, Info = 2, Debug = 3, Trace = 4 };

// Messages above this level are dropped (default Info).
void setLevel(Level l) noexcept;
Level level() noexcept;
// Level = base raised by v steps (v = the -v count), capped at Trace.
void setVerbosity(int v, Level base = Level::Info) noexcept;
// Route libbpf and libxdp diagnostics through this logger (their warnings at
// Warn, info at Debug, debug at Trace). The hooks are process-wide: this
// replaces any print function the application gave libbpf or libxdp.
void routeLibbpf() noexcept;

// Receives every line that passes the level: one line, no trailing newline,
// no "npf: <level>: " prefix. Called with a lock held (one line at a time),
// from any thread, including libnpf's workers: keep it short, do not log from
// it, do not throw (an exception is swallowed and the line dropped).
using Sink = std::function<void(Level, std::string_view)>;
// Replaces the sink; an empty one restores the default (stderr).
void setSink(Sink sink);
// "error", "warning", "info", "debug", "trace": the default sink's tags.
const char* levelName(Level l) noexcept;

void write(Level l, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

// Allows `burst` messages per `period`; the first message after a quiet
// period reports how many were suppressed.
class RateLimit {
public:
    explicit RateLimit(int burst = 10, std::chrono::milliseconds period = std::chrono::seconds(1))
        : burst_(burst), periodNs_(std::chrono::nanoseconds(period).count())
    {
    }
    // True if this message may be printed; *suppressed gets the count dropped before it.
    bool allow(uint64_t* suppressed) noexcept;

private:
    int burst_;
    int64_t periodNs_;
    std::atomic<int64_t> windowStart_{0};
    std::atomic<int> used_{0};
    std::atomic<uint64_t> dropped_{0};
};

} // namespace npf::log

#define NPF_LOG(lvl, ...)                                                        \
    do {                                                                         \
        if (static_cast<int>(lvl) <= static_cast<int>(::npf::log::level()))      \
            ::npf::log::write(lvl, __VA_ARGS__);                                 \
    } while (0)
#define NPF_ERR(...) NPF_LOG(::npf::log::Level::Error, __VA_ARGS__)
#define NPF_WARN(...) NPF_LOG(::npf::log::Level::Warn, __VA_ARGS__)
#define NPF_INFO(...) NPF_LOG(::npf::log::Level::Info, __VA_ARGS__)
#define NPF_DEBUG(...) NPF_LOG(::npf::log::Level::Debug, __VA_ARGS__)
#define NPF_TRACE(...) NPF_LOG(::npf::log::Level::Trace, __VA_ARGS__)

// Rate-limited warning for hot paths: one static limiter per call site.
#define NPF_WARN_RL(...)                                                         \
    do {                                                                         \
        static ::npf::log::RateLimit npf_rl_;                                    \
        uint64_t npf_sup_ = 0;                                                   \
        if (npf_rl_.allow(&npf_sup_)) {                                          \
            if (npf_sup_)                                                        \
                NPF_WARN("(%llu similar messages suppressed)",                   \
                         static_cast<unsigned long long>(npf_sup_));             \
            NPF_WARN(__VA_ARGS__);                                               \
        }                                                                        \
    } while (0)
