// What /readyz checks beyond npfd's phase and liveness (health.h): that what
// npfd set up at start still serves -- each interface still there (its
// sockets bound: the service's pager notices when the kernel unbinds them)
// with npfd's npf_xdp attached (someone may have detached it, or another
// npf instance replaced it: the datagrams then pass to the kernel while npfd
// looks fine), and the client socket file still npfd's. On the probe's
// thread: no lock of the control loop's, one netlink query per interface
// (entering the interface's network namespace for one that is not npfd's).
#pragma once

#include <string>
#include <vector>

#include "ipc/unix_socket.h"

namespace npf::daemon {

struct Iface;

// What is not served, each "LABEL: why" or about the socket; empty: all is.
std::vector<std::string> notServed(const std::vector<Iface>& ifaces, const ipc::Listener& listener);

} // namespace npf::daemon
