#include "dataplane/lib_log.h"

#include <cstdarg>
#include <cstdio>

#include "sys/log.h"

namespace npf::dataplane {
namespace {

LibLogCapture* g_capture = nullptr;

void capture(bool warning, const char* fmt, va_list ap)
{
    char buf[1024];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    if (n < 0 || !g_capture)
        return;
    std::string s(buf);
    while (!s.empty() && s.back() == '\n')
        s.pop_back();
    g_capture->add(warning, std::move(s));
}

int bpfPrint(enum libbpf_print_level lvl, const char* fmt, va_list ap)
{
    capture(lvl == LIBBPF_WARN, fmt, ap);
    return 0;
}

int xdpPrint(enum libxdp_print_level lvl, const char* fmt, va_list ap)
{
    capture(lvl == LIBXDP_WARN, fmt, ap);
    return 0;
}

} // namespace

LibLogCapture::LibLogCapture()
    : prevCapture_(g_capture), prevBpf_(libbpf_set_print(bpfPrint)), prevXdp_(libxdp_set_print(xdpPrint))
{
    g_capture = this;
}

LibLogCapture::~LibLogCapture()
{
    g_capture = prevCapture_;
    libbpf_set_print(prevBpf_);
    libxdp_set_print(prevXdp_);
}

void LibLogCapture::add(bool warning, std::string msg)
{
    if (warning)
        NPF_DEBUG("%s", msg.c_str());
    else
        NPF_TRACE("%s", msg.c_str());
    lines_.push_back({warning, std::move(msg)});
}

void LibLogCapture::replayWarnings(std::string_view from, std::string_view skip) const
{
    if (log::level() >= log::Level::Debug)
        return; // already shown
    size_t start = 0;
    if (!from.empty())
        for (size_t i = 0; i < lines_.size(); ++i)
            if (lines_[i].text.find(from) != std::string::npos)
                start = i + 1;
    for (size_t i = start; i < lines_.size(); ++i) {
        const Line& l = lines_[i];
        if (l.warning && (skip.empty() || l.text.find(skip) == std::string::npos))
            NPF_WARN("%s", l.text.c_str());
    }
}

bool LibLogCapture::saw(std::string_view s) const
{
    for (const Line& l : lines_)
        if (l.text.find(s) != std::string::npos)
            return true;
    return false;
}

std::string LibLogCapture::after(std::string_view marker) const
{
    for (const Line& l : lines_)
        if (size_t pos = l.text.find(marker); pos != std::string::npos)
            return l.text.substr(pos + marker.size());
    return {};
}

} // namespace npf::dataplane
