// Network namespaces by path (/run/netns/NAME, /proc/PID/ns/net): enter one
// for a scope, on the calling thread only, and tell two apart by inode.
#pragma once

#include <cstdint>
#include <string>

#include "sys/fd.h"

namespace npf {

// The calling thread in the namespace at `path` until destruction, then back
// where it was. An empty path stays where it is. Throws naming the path.
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

// The inode of the network namespace at `path` ("" = the calling thread's);
// throws if it is not one.
uint64_t netnsInode(const std::string& path = "");

} // namespace npf
