// The kernel side of npf-cni: the pod's listener ("@npf", SOCK_SEQPACKET, in
// the pod's network namespace, made by entering it: CAP_SYS_ADMIN, which
// a CNI plugin has) and its handover to npfd over the pods socket.
#pragma once

#include <chrono>
#include <string>

#include "cni/records.h"
#include "ipc/channel.h"
#include "sys/fd.h"

namespace npf::cni {

// The listener "@npf" bound in the network namespace at `netnsPath`.
// Throws naming the namespace; EADDRINUSE when "@npf" is bound there
// already (by npfd's listener from an earlier handover, which still serves,
// or by another process of the pod).
Fd listenInPod(const std::string& netnsPath);

// Makes the pod's listener and hands it to npfd on `ch`; throws CniError
// (NpfdRefused) with npfd's message if npfd refuses it. `listenerTaken`
// is set (and nothing sent) when "@npf" is bound in the pod already.
void handOver(ipc::Channel& ch, const Record& r, bool* listenerTaken);

// Tells npfd the pod is gone (its clients disconnected).
void withdraw(ipc::Channel& ch, const std::string& container);

} // namespace npf::cni
