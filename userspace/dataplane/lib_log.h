// Quiets libbpf/libxdp while a control-plane step runs that is expected to be
// noisy (libxdp probing its dispatcher logs a page of warnings before it falls
// back to a single program). Their messages go to npf::log one level lower
// (warnings at Debug, the rest at Trace) and are kept, so a step that fails
// can still show what the libraries said.
//
// Not thread-safe with other libbpf users: the print hooks are process-wide.
#pragma once

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include <string>
#include <string_view>
#include <vector>

namespace npf::dataplane {

class LibLogCapture {
public:
    LibLogCapture();
    ~LibLogCapture();
    LibLogCapture(const LibLogCapture&) = delete;
    LibLogCapture& operator=(const LibLogCapture&) = delete;

    // Logs the captured library warnings at Warn level (after a failure):
    // only those after the last message containing `from` (if given and
    // seen), and none containing `skip` (e.g. what the caller reports itself).
    void replayWarnings(std::string_view from = {}, std::string_view skip = {}) const;
    // True if a captured message contains `s`.
    bool saw(std::string_view s) const;
    // The rest of the first captured message that contains `marker`, or "".
    std::string after(std::string_view marker) const;

    void add(bool warning, std::string msg);

private:
    struct Line {
        bool warning;
        std::string text;
    };
    std::vector<Line> lines_;
    LibLogCapture* prevCapture_;
    libbpf_print_fn_t prevBpf_;
    libxdp_print_fn_t prevXdp_;
};

} // namespace npf::dataplane
