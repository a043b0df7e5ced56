// One small logger: levels, printf-style with format checking, a verbosity
// raised by each -v, libbpf/libxdp output routed through it, and a rate limit
// for anything logged per packet or per fault.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace npf::log {

enum class Level { Error = 0, Warn = 1, Info = 2, Debug = 3, Trace = 4 };

// Messages above this level are dropped (default Info).
void setLevel(Level l) noexcept;
Level level() noexcept;
// Level = base raised by v steps (v = the -v count), capped at Trace.
void setVerbosity(int v, Level base = Level::Info) noexcept;
// Route libbpf and libxdp diagnostics through this logger (libbpf debug -> Debug).
void routeLibbpf() noexcept;

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
