// The logger is part of libnpf's public API (npf/log.h); internal code keeps
// including it as sys/log.h.
#pragma once

#include "npf/log.h"

#include <cstdarg>

namespace npf::log {

// write() with a va_list, for the library's own routes into the logger
// (log_libbpf.cpp): not filtered by level.
void vwrite(Level l, const char* fmt, va_list ap) noexcept;

} // namespace npf::log
