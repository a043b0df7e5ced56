// The pods npf-cni hands npfd (ipc/pods.h, docs/protocol.md "Pods"): npfd's
// pods socket (root only: the container runtime's plugin, or the helper
// that re-hands pods after npfd restarts) and, per pod, the listener npf-cni
// bound to "@npf" in the pod's network namespace, with who the pod is. A
// client that connects through a pod's listener is that pod's, whatever uid
// it runs as: only processes in that network namespace can reach it.
//
// Control thread only. The daemon's epoll loop calls handle() for the
// descriptors this adds to its epoll set, and accepts clients on the pod
// listeners itself (podOf).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ipc/pods.h"
#include "ipc/unix_socket.h"
#include "sys/fd.h"

namespace npf::daemon {

class PodRegistry {
public:
    // Pods npfd keeps at once (a node runs at most a few hundred).
    static constexpr size_t kMaxPods = 4096;
    // Connections on the pods socket at once (npf-cni runs, the restore helper).
    static constexpr size_t kMaxAdmins = 32;

    // Called when a pod is deleted: disconnect its clients.
    using Withdraw = std::function<void(const std::string& container)>;

    // Listens on `path` (mode 0600, npfd's user and group) and adds it to
    // `epollFd` (data.fd = the descriptor). `ownNetns`: npfd's network
    // namespace cookie (a listener there is not a pod's).
    PodRegistry(const std::string& path, int epollFd, uint64_t ownNetns, Withdraw withdraw);
    ~PodRegistry();
    PodRegistry(const PodRegistry&) = delete;
    PodRegistry& operator=(const PodRegistry&) = delete;

    // An epoll event on `fd`: true if it was the pods socket or one of its
    // connections (handled: requests answered), false if it is not ours.
    bool handle(int fd) noexcept;
    // The pod whose listener `fd` is; nullptr if it is none.
    std::shared_ptr<const ipc::PodInfo> podOf(int fd) const noexcept;
    size_t pods() const noexcept { return pods_.size(); }
    // Calls fn(fd) for every pod's listener (the daemon pauses accepting).
    template <typename Fn>
    void forEachListener(Fn&& fn) const
    {
        for (const auto& [fd, container] : byFd_)
            fn(fd);
    }
    const std::string& path() const noexcept { return listener_.path(); }

private:
    struct PodListener {
        std::shared_ptr<const ipc::PodInfo> pod;
        Fd fd;
    };

    void acceptAdmins() noexcept;
    void serveAdmin(int fd) noexcept;
    void closeAdmin(int fd) noexcept;
    std::string request(ipc::WireMessage& msg); // the reply's bytes
    std::string add(const ipc::Message& m, std::vector<Fd>& fds);
    std::string del(const ipc::Message& m);
    void remove(std::map<std::string, PodListener>::iterator it) noexcept;

    ipc::Listener listener_;
    int epoll_;
    uint64_t ownNetns_;
    Withdraw withdraw_;
    std::map<int, Fd> admins_;                   // connections on the pods socket, by fd
    std::map<std::string, PodListener> pods_;    // by container id
    std::map<int, std::string> byFd_;            // pod listener fd -> container id
};

} // namespace npf::daemon
