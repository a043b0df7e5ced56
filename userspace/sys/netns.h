// Enter a network namespace (/run/netns/NAME, /proc/PID/ns/net, or an open
// descriptor of one) for a scope, on the calling thread only.
#pragma once

#include <string>

#include "sys/fd.h"

namespace npf {

// The calling thread in the namespace at `path` until destruction, then back
// where it was. An empty path, or the namespace the thread is in, stays
// where it is (no setns, which needs CAP_SYS_ADMIN). Throws naming the path.
class NetnsScope {
public:
    explicit NetnsScope(const std::string& path);
    // The namespace of an open descriptor (e.g. one kept from
    // /proc/thread-self/ns/net), `what` naming it in errors.
    NetnsScope(int nsFd, const std::string& what);
    ~NetnsScope();
    NetnsScope(const NetnsScope&) = delete;
    NetnsScope& operator=(const NetnsScope&) = delete;

private:
    void enter(int nsFd, const std::string& what);
    Fd orig_;
};

} // namespace npf
