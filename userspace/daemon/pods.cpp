#include "daemon/pods.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

#include "sys/error.h"
#include "sys/log.h"

namespace npf::daemon {
namespace {

using ipc::ErrorCode;
using ipc::ProtocolError;

void watch(int epollFd, int fd)
{
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    checkErrno(::epoll_ctl(epollFd, EPOLL_CTL_ADD, fd, &ev), "npfd: epoll_ctl for the pods socket");
}

} // namespace

PodRegistry::PodRegistry(const std::string& path, int epollFd, uint64_t ownNetns, Withdraw withdraw)
    : listener_(ipc::listenSocket(path, 0600)), epoll_(epollFd), ownNetns_(ownNetns), withdraw_(std::move(withdraw))
{
    watch(epoll_, listener_.fd());
    NPF_INFO("npfd: pods socket %s (npf-cni)", listener_.path().c_str());
}

PodRegistry::~PodRegistry()
{
    for (auto& [fd, admin] : admins_)
        (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    for (auto& [fd, container] : byFd_)
        (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, listener_.fd(), nullptr);
}

bool PodRegistry::handle(int fd) noexcept
{
    if (fd == listener_.fd()) {
        acceptAdmins();
        return true;
    }
    if (!admins_.count(fd))
        return false;
    serveAdmin(fd);
    return true;
}

std::shared_ptr<const ipc::PodInfo> PodRegistry::podOf(int fd) const noexcept
{
    auto it = byFd_.find(fd);
    return it == byFd_.end() ? nullptr : pods_.at(it->second).pod;
}

void PodRegistry::acceptAdmins() noexcept
{
    for (;;) {
        Fd c;
        try {
            c = listener_.accept();
        } catch (const std::exception& e) {
            NPF_WARN_RL("npfd: pods socket: %s", e.what());
            return;
        }
        if (!c)
            return;
        // The socket is 0600: only npfd's user gets here. Checked again, in
        // case someone loosened its mode.
        ipc::PeerCred cred{};
        try {
            cred = ipc::peerCred(c.get());
        } catch (const std::exception&) {
            continue;
        }
        if (cred.uid != 0 && cred.uid != ::geteuid()) {
            NPF_WARN_RL("npfd: pods socket: pid %d uid %u refused (root or npfd's user only)", cred.pid, cred.uid);
            continue;
        }
        if (admins_.size() >= kMaxAdmins) {
            NPF_WARN_RL("npfd: pods socket: %zu connections open already: pid %d refused", admins_.size(), cred.pid);
            continue;
        }
        const int raw = c.get();
        try {
            watch(epoll_, raw);
        } catch (const std::exception& e) {
            NPF_WARN("%s", e.what());
            continue;
        }
        admins_.emplace(raw, std::move(c));
    }
}

void PodRegistry::serveAdmin(int fd) noexcept
{
    for (int i = 0; i < 16; i++) {
        ipc::RecvResult r;
        try {
            r = ipc::recvMessage(fd);
        } catch (const std::exception& e) {
            NPF_WARN("npfd: pods socket: %s", e.what());
            closeAdmin(fd);
            return;
        }
        if (r.status == ipc::IoStatus::WouldBlock)
            return;
        if (r.status == ipc::IoStatus::Eof) {
            closeAdmin(fd);
            return;
        }
        const std::string reply = request(r.message);
        try {
            if (ipc::sendMessage(fd, reply) != ipc::IoStatus::Ok) { // gone, or does not take its replies
                closeAdmin(fd);
                return;
            }
        } catch (const std::exception&) {
            closeAdmin(fd);
            return;
        }
    }
}

void PodRegistry::closeAdmin(int fd) noexcept
{
    (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    admins_.erase(fd);
}

std::string PodRegistry::request(ipc::WireMessage& msg)
{
    uint32_t id = 0;
    try {
        const ipc::Message m = ipc::parse(msg.bytes);
        id = m.id;
        if (m.type == ipc::PodAddRequest::kType)
            return add(m, msg.fds);
        if (m.type == ipc::PodDelRequest::kType)
            return del(m);
        if (m.type == ipc::PodsRequest::kType) {
            (void)ipc::PodsRequest::decode(m);
            ipc::PodsReply r;
            for (const auto& [container, p] : pods_)
                r.containers.push_back(container);
            return r.encode(m.id);
        }
        throw ProtocolError(ErrorCode::BadMessage, "unknown request '" + m.type + "' (pod_add, pod_del, pods)", 0,
                            m.id);
    } catch (const ProtocolError& e) {
        NPF_WARN("npfd: pods socket: %s", e.what());
        return ipc::ErrorReply::from(e).encode(id ? id : e.id());
    } catch (const std::exception& e) {
        NPF_WARN("npfd: pods socket: %s", e.what());
        return ipc::ErrorReply{ErrorCode::Internal, EIO, e.what()}.encode(id);
    }
}

std::string PodRegistry::add(const ipc::Message& m, std::vector<Fd>& fds)
{
    ipc::PodAddRequest rq = ipc::PodAddRequest::decode(m);
    if (fds.size() != 1 || !ipc::isSeqpacketListener(fds[0].get()))
        throw ProtocolError(ErrorCode::BadFd, "pod_add carries one descriptor: a listening AF_UNIX SOCK_SEQPACKET "
                                              "socket (got " + std::to_string(fds.size()) + " descriptors" +
                                                  (fds.size() == 1 ? ", not such a socket)" : ")"),
                            EBADF, m.id);
    if (ipc::peerNetns(fds[0].get()) == ownNetns_)
        throw ProtocolError(ErrorCode::NotAllowed,
                            rq.pod.describe() + ": the listener is in npfd's own network namespace, not the pod's",
                            EINVAL, m.id);
    auto old = pods_.find(rq.pod.container);
    if (old == pods_.end() && pods_.size() >= kMaxPods)
        throw ProtocolError(ErrorCode::NoSpace, "npfd keeps " + std::to_string(kMaxPods) + " pods at most", ENOSPC,
                            m.id);
    Fd fd = std::move(fds[0]);
    ipc::setNonBlocking(fd.get(), true);
    watch(epoll_, fd.get());
    if (old != pods_.end()) { // npf-cni again (a retried ADD, or the restore helper): the new listener serves
        (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, old->second.fd.get(), nullptr);
        byFd_.erase(old->second.fd.get());
        pods_.erase(old);
    }
    auto pod = std::make_shared<const ipc::PodInfo>(std::move(rq.pod));
    NPF_INFO("npfd: %s (container %.12s, addresses %s): its clients connect to %s", pod->describe().c_str(),
             pod->container.c_str(), pod->addrList().c_str(), ipc::kPodSocket);
    byFd_[fd.get()] = pod->container;
    pods_[pod->container] = PodListener{pod, std::move(fd)};
    return ipc::OkReply{}.encode(m.id);
}

std::string PodRegistry::del(const ipc::Message& m)
{
    const ipc::PodDelRequest rq = ipc::PodDelRequest::decode(m);
    auto it = pods_.find(rq.container);
    if (it != pods_.end()) {
        NPF_INFO("npfd: %s deleted: its clients are disconnected", it->second.pod->describe().c_str());
        remove(it);
    }
    withdraw_(rq.container); // its clients, also when npfd never had its listener (replaced, restarted)
    return ipc::OkReply{}.encode(m.id);
}

void PodRegistry::remove(std::map<std::string, PodListener>::iterator it) noexcept
{
    (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
    byFd_.erase(it->second.fd.get());
    pods_.erase(it);
}

} // namespace npf::daemon
