// npf-send: send a file (or a generated stream) as the datagrams of one npf
// flow, paced by the receiver's credits (npf::Sender, npf/sender.h). The
// sending side of `npf-recv --credits`; `--plain` for receivers that grant
// none. On exit a summary on stderr: what was sent, and how credit held it back.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "npf/error.h"
#include "npf/log.h"
#include "npf/npf.h"
#include "npf/sender.h"
#include "npf/version.h"
#include "npf_exit_codes.h"

namespace {

struct Options {
    std::string to, from, input;
    uint16_t port = 0, fromPort = 0;
    uint64_t count = 0;
    uint32_t size = 1400, window = 64, timeoutMs = 2000;
    double rate = 0;
    bool plain = false, json = false, quiet = false;
};

constexpr uint32_t kMaxPayload = 65507; // IPv4's UDP payload limit
constexpr size_t kChunk = 256;          // datagrams handed to the Sender per call

// Reads up to n datagrams of `size` bytes (the last may be short) from fd
// into buf; returns their lengths, none at end of file. Throws on a read error.
std::vector<size_t> readDatagrams(int fd, std::vector<uint8_t>& buf, uint32_t size, size_t n)
{
    buf.resize(size_t(size) * n);
    size_t have = 0;
    while (have < buf.size()) {
        const ssize_t r = ::read(fd, buf.data() + have, buf.size() - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            throw std::system_error(errno, std::generic_category(), "read");
        if (r == 0)
            break;
        have += size_t(r);
    }
    std::vector<size_t> lens;
    for (size_t off = 0; off < have; off += size)
        lens.push_back(std::min<size_t>(size, have - off));
    return lens;
}

// A generated datagram: its number (8 bytes, big-endian) repeated.
void fillGenerated(uint8_t* p, uint32_t size, uint64_t number)
{
    uint8_t word[8];
    for (int i = 0; i < 8; i++)
        word[i] = static_cast<uint8_t>(number >> (56 - 8 * i));
    for (uint32_t i = 0; i < size; i += 8)
        std::memcpy(p + i, word, std::min<uint32_t>(8, size - i));
}

void printSummary(const Options& o, const npf::SenderStats& s, uint64_t bytes, double secs, const std::string& error)
{
    using ull = unsigned long long;
    if (o.json) {
        nlohmann::ordered_json j{{"sent", s.sent},
                                 {"bytes", bytes},
                                 {"seconds", secs},
                                 {"mode", o.plain ? "plain" : "credits"},
                                 {"credits", s.credits},
                                 {"throttled", s.throttled},
                                 {"waited_ns", s.waitedNs},
                                 {"limit", s.limit},
                                 {"received", s.received},
                                 {"ignored", s.ignored},
                                 {"rebased", s.rebased},
                                 {"resynced", s.resynced},
                                 {"last_hint_us", s.lastHintUs}};
        if (!error.empty())
            j["error"] = error;
        fprintf(stderr, "%s\n", j.dump().c_str());
        return;
    }
    fprintf(stderr, "npf-send: %llu datagrams (%llu bytes) in %.3f s, %.0f/s%s%s\n", ull(s.sent), ull(bytes), secs,
            secs > 0 ? double(s.sent) / secs : 0.0, error.empty() ? "" : "; stopped: ", error.c_str());
    if (!o.plain)
        fprintf(stderr,
                "  credits  heard=%llu throttled=%llu waited_ms=%.1f limit=%llu received=%llu ignored=%llu "
                "rebased=%llu resynced=%llu  # throttled: times it had used up its grant and waited\n",
                ull(s.credits), ull(s.throttled), double(s.waitedNs) / 1e6, ull(s.limit), ull(s.received),
                ull(s.ignored), ull(s.rebased), ull(s.resynced));
}

int run(const Options& o)
{
    npf::SenderConfig c{.to = o.to, .port = o.port, .from = o.from, .fromPort = o.fromPort};
    c.credits = !o.plain;
    c.initialWindow = o.window;
    c.timeout = std::chrono::milliseconds(o.timeoutMs);
    c.rate = o.rate;
    npf::Sender sender(c);
    const int in = o.input.empty() ? -1 : o.input == "-" ? STDIN_FILENO : ::open(o.input.c_str(), O_RDONLY | O_CLOEXEC);
    if (!o.input.empty() && in < 0)
        throw std::system_error(errno, std::generic_category(), "open " + o.input);
    std::vector<uint8_t> buf;
    std::vector<std::span<const uint8_t>> dgrams;
    uint64_t bytes = 0, number = 0;
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        std::vector<size_t> lens;
        if (in >= 0) {
            lens = readDatagrams(in, buf, o.size, kChunk);
        } else {
            const uint64_t n = std::min<uint64_t>(kChunk, o.count - number);
            buf.resize(size_t(o.size) * n);
            for (uint64_t i = 0; i < n; i++)
                fillGenerated(buf.data() + i * o.size, o.size, number + i);
            lens.assign(n, o.size);
        }
        if (lens.empty())
            break;
        dgrams.clear();
        for (size_t i = 0; i < lens.size(); i++)
            dgrams.emplace_back(buf.data() + i * o.size, lens[i]);
        size_t done = 0;
        while (done < dgrams.size()) {
            const int64_t r = sender.send(std::span(dgrams).subspan(done));
            if (r < 0) {
                error = r == -ETIMEDOUT ? "no credit from the receiver for " + std::to_string(o.timeoutMs) +
                                              " ms (is it running with --credits? --plain sends without)"
                                        : std::string(strerror(int(-r)));
                break;
            }
            for (size_t i = done; i < done + size_t(r); i++)
                bytes += dgrams[i].size();
            done += size_t(r);
        }
        if (!error.empty())
            break;
        number += lens.size();
    }
    if (in > STDIN_FILENO)
        ::close(in);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o.quiet)
        printSummary(o, sender.stats(), bytes, secs, error);
    return error.empty() ? npf::exit_codes::kExitOk : npf::exit_codes::kExitFailure;
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    CLI::App app{"npf-send: send a file or a generated stream as the UDP datagrams of an npf flow, paced by the "
                 "receiver's credits (npf-recv --credits)"};
    app.set_version_flag("--version", std::string("npf-send ") + npf_version() + " (npf ABI " +
                                          std::to_string(npf_abi_version()) + ")");
    app.add_option("address", o.to, "the receiver's IPv4 or IPv6 address")->required();
    app.add_option("port", o.port, "the flow's UDP port")->required()->check(CLI::Range(1, 65535));
    auto* input = app.add_option("-i,--input", o.input, "send this file's bytes, in order ('-' = stdin)");
    auto* count = app.add_option("-n,--count", o.count, "send this many generated datagrams instead")
                      ->check(CLI::Range(uint64_t{1}, UINT64_MAX));
    input->excludes(count);
    app.add_option("-s,--size", o.size, "payload bytes per datagram (a file's last may be shorter)")
        ->check(CLI::Range(1u, kMaxPayload))
        ->capture_default_str();
    app.add_option("--from", o.from, "local address to send from (default: the kernel's choice)");
    app.add_option("--from-port", o.fromPort, "local UDP port (default: an ephemeral one)")
        ->check(CLI::Range(1, 65535));
    app.add_flag("--plain", o.plain, "honour no credits: for a receiver that grants none");
    app.add_option("--window", o.window, "datagrams sent before the first credit")
        ->check(CLI::Range(1u, uint32_t{NPF_POST_RING_SIZE}))
        ->capture_default_str();
    app.add_option("--timeout-ms", o.timeoutMs, "give up when no credit comes for this long")
        ->check(CLI::Range(1u, 3600u * 1000u))
        ->capture_default_str();
    app.add_option("--rate", o.rate, "datagrams per second at most (0 = no limit)")
        ->check(CLI::Range(0.0, 1e9))
        ->capture_default_str();
    app.add_flag("--json", o.json, "the exit summary as one JSON object on stderr");
    app.add_flag("-q,--quiet", o.quiet, "no summary on exit");
    app.footer("Exactly one of --input and --count. With credits (the default) npf-send sends no datagram\n"
               "the receiver has no buffer posted for: --window before the first credit, then what each\n"
               "grant allows (docs/architecture.md, Credits). Exit 1 when the receiver stops granting\n"
               "for --timeout-ms.");
    try {
        app.parse(argc, argv);
        if (o.input.empty() && !o.count)
            throw CLI::ValidationError("one of --input and --count is required");
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return app.exit(e);
        fprintf(stderr, "npf-send: error: %s (npf-send --help)\n", e.what());
        return npf::exit_codes::kExitUsage;
    }
    try {
        return run(o);
    } catch (const std::exception& e) {
        fprintf(stderr, "npf-send: error: %s\n", e.what());
        return npf::exit_codes::exitCodeFor(e);
    }
}
