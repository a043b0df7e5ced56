// The C API's logging (npf/npf.h): npf::log's level and sink (npf/log.h) for
// C callers. The NPF_LOG_* constants are npf::log::Level's values.
#include <string>
#include <string_view>

#include "capi/error.h"
#include "npf/log.h"
#include "npf/npf.h"

using npf::capi::fail;
using npf::capi::guarded;
using npf::log::Level;

static_assert(NPF_LOG_ERROR == static_cast<int>(Level::Error) && NPF_LOG_WARN == static_cast<int>(Level::Warn) &&
              NPF_LOG_INFO == static_cast<int>(Level::Info) && NPF_LOG_DEBUG == static_cast<int>(Level::Debug) &&
              NPF_LOG_TRACE == static_cast<int>(Level::Trace));

int npf_log_set_level(int level)
{
    if (level < NPF_LOG_ERROR || level > NPF_LOG_TRACE)
        return fail(EINVAL, "npf_log_set_level: level " + std::to_string(level) +
                                " is none of NPF_LOG_ERROR (0) .. NPF_LOG_TRACE (4)");
    npf::log::setLevel(static_cast<Level>(level));
    return 0;
}

int npf_log_set_sink(npf_log_sink_fn sink, void* user)
{
    return guarded([&] {
        if (!sink) {
            npf::log::setSink({});
            return 0;
        }
        // npf::log's sink gets a string_view; a C sink wants a NUL-terminated
        // string: a copy, in the logging thread's own buffer (kept for its
        // next line). A failed copy throws into the logger, which drops the line.
        npf::log::setSink([sink, user](Level l, std::string_view line) {
            thread_local std::string copy;
            copy.assign(line);
            sink(static_cast<int>(l), copy.c_str(), user);
        });
        return 0;
    });
}
