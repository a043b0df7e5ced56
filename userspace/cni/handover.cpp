#include "cni/handover.h"

#include <cerrno>

#include "cni/cni.h"
#include "ipc/pods.h"
#include "ipc/unix_socket.h"
#include "sys/error.h"
#include "sys/netns.h"

namespace npf::cni {

Fd listenInPod(const std::string& netnsPath)
{
    NetnsScope in(netnsPath);
    return ipc::listenAbstract(ipc::kPodSocket);
}

void handOver(ipc::Channel& ch, const Record& r, bool* listenerTaken)
{
    *listenerTaken = false;
    Fd listener;
    try {
        listener = listenInPod(r.netns);
    } catch (const std::system_error& e) {
        if (e.code().value() != EADDRINUSE)
            throw;
        *listenerTaken = true;
        return;
    }
    const int fds[] = {listener.get()};
    try {
        (void)ch.call(ipc::PodAddRequest{r.pod}, fds);
    } catch (const ipc::RemoteError& e) {
        throw CniError(Code::NpfdRefused, r.pod.describe() + ": " + e.what());
    }
}

void withdraw(ipc::Channel& ch, const std::string& container)
{
    try {
        (void)ch.call(ipc::PodDelRequest{container});
    } catch (const ipc::RemoteError& e) {
        throw CniError(Code::NpfdRefused, "container " + container + ": " + e.what());
    }
}

} // namespace npf::cni
