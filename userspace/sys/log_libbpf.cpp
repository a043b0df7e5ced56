// libbpf's and libxdp's messages through npf's logger (routeLibbpf, npf/log.h):
// a file of its own, so that a program that never routes them (npf-cni)
// does not need libbpf at all.
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include <cstdarg>

#include "sys/log.h"

namespace npf::log {
namespace {

int libbpfPrint(enum libbpf_print_level lvl, const char* fmt, va_list ap)
{
    Level l = lvl == LIBBPF_WARN ? Level::Warn : lvl == LIBBPF_INFO ? Level::Debug : Level::Trace;
    if (static_cast<int>(l) <= static_cast<int>(level()))
        vwrite(l, fmt, ap);
    return 0;
}

int libxdpPrint(enum libxdp_print_level lvl, const char* fmt, va_list ap)
{
    Level l = lvl == LIBXDP_WARN ? Level::Warn : lvl == LIBXDP_INFO ? Level::Debug : Level::Trace;
    if (static_cast<int>(l) <= static_cast<int>(level()))
        vwrite(l, fmt, ap);
    return 0;
}

} // namespace

void routeLibbpf() noexcept
{
    libbpf_set_print(libbpfPrint);
    libxdp_set_print(libxdpPrint);
}

} // namespace npf::log
