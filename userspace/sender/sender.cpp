#include "npf/sender.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "npf/abi.h"
#include "sender/credit_window.h"
#include "sys/clock.h"
#include "sys/fd.h"

namespace npf {
namespace {

constexpr size_t kBatch = 32; // datagrams per sendmmsg
// Credits are read from the socket once the room left is below this (a
// system call per batch otherwise): they only ever add room.
constexpr uint64_t kReadBelow = 8 * kBatch;

// addr:port as a socket address; throws std::invalid_argument.
sockaddr_storage socketAddress(const std::string& addr, uint16_t port, const char* what, socklen_t* len)
{
    sockaddr_storage ss{};
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (::inet_pton(AF_INET, addr.c_str(), &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        *len = sizeof *a4;
    } else if (::inet_pton(AF_INET6, addr.c_str(), &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        *len = sizeof *a6;
    } else {
        throw std::invalid_argument(std::string(what) + " '" + addr + "' is not an IPv4 or IPv6 address");
    }
    return ss;
}

bool sameAddress(const sockaddr_storage& a, const sockaddr_storage& b) noexcept
{
    if (a.ss_family != b.ss_family)
        return false;
    if (a.ss_family == AF_INET)
        return std::memcmp(&reinterpret_cast<const sockaddr_in&>(a).sin_addr,
                           &reinterpret_cast<const sockaddr_in&>(b).sin_addr, 4) == 0;
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, 16) == 0;
}

} // namespace

struct Sender::Impl {
    SenderConfig cfg;
    Fd sock;
    sockaddr_storage dest{};
    socklen_t destLen = 0;
    CreditWindow window;
    SenderStats st;
    uint64_t startNs = 0; // the first send, for `rate`
    uint64_t lastCreditNs = 0;

    explicit Impl(const SenderConfig& c) : cfg(c), window(c.initialWindow) {}

    void readCredits() noexcept;
    // Datagrams that may go now (credit and rate), at most `want`.
    uint64_t room(uint64_t want, uint64_t nowNs) const noexcept;
    // Waits for credit or the rate's next slot until deadlineNs; false when it passed.
    bool waitRoom(uint64_t deadlineNs) noexcept;
};

Sender::Sender(const SenderConfig& cfg) : impl_(std::make_unique<Impl>(cfg))
{
    Impl& s = *impl_;
    if (cfg.port == 0)
        throw std::invalid_argument("npf::Sender: the flow's port must be 1-65535");
    if (cfg.credits && cfg.initialWindow == 0)
        throw std::invalid_argument("npf::Sender: initialWindow must be at least 1 (the receiver learns the sender "
                                    "from its first datagrams)");
    if (cfg.rate < 0)
        throw std::invalid_argument("npf::Sender: rate must be >= 0");
    s.dest = socketAddress(cfg.to, cfg.port, "npf::Sender: destination", &s.destLen);
    s.sock.reset(::socket(s.dest.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.sock)
        throw std::system_error(errno, std::generic_category(), "npf::Sender: UDP socket");
    if (!cfg.from.empty() || cfg.fromPort) {
        socklen_t len = 0;
        sockaddr_storage local{};
        if (!cfg.from.empty()) {
            local = socketAddress(cfg.from, cfg.fromPort, "npf::Sender: source", &len);
        } else {
            local.ss_family = s.dest.ss_family;
            len = s.destLen;
            if (local.ss_family == AF_INET)
                reinterpret_cast<sockaddr_in&>(local).sin_port = htons(cfg.fromPort);
            else
                reinterpret_cast<sockaddr_in6&>(local).sin6_port = htons(cfg.fromPort);
        }
        if (local.ss_family != s.dest.ss_family)
            throw std::invalid_argument("npf::Sender: source " + cfg.from + " and destination " + cfg.to +
                                        " are of different address families");
        if (::bind(s.sock.get(), reinterpret_cast<sockaddr*>(&local), len) < 0)
            throw std::system_error(errno, std::generic_category(),
                                    "npf::Sender: binding " + (cfg.from.empty() ? std::string("*") : cfg.from) + ":" +
                                        std::to_string(cfg.fromPort));
    }
}

Sender::~Sender() = default;

int Sender::fd() const noexcept { return impl_->sock.get(); }

SenderStats Sender::stats() const noexcept
{
    SenderStats s = impl_->st;
    s.limit = impl_->window.limit();
    s.received = impl_->window.received();
    s.rebased = impl_->window.rebased();
    return s;
}

void Sender::pollCredits() noexcept { impl_->readCredits(); }

void Sender::Impl::readCredits() noexcept
{
    for (;;) {
        npf_credit m;
        sockaddr_storage from{};
        socklen_t fromLen = sizeof from;
        const ssize_t n = ::recvfrom(sock.get(), &m, sizeof m, MSG_DONTWAIT | MSG_TRUNC,
                                     reinterpret_cast<sockaddr*>(&from), &fromLen);
        if (n < 0)
            return; // EAGAIN, or an ICMP error queued on the socket: nothing to take
        if (n != sizeof m || !sameAddress(from, dest) || ntohl(m.magic) != NPF_CREDIT_MAGIC ||
            m.version != NPF_CREDIT_VERSION || ntohs(m.port) != cfg.port) {
            st.ignored++;
            continue;
        }
        const uint64_t received = be64toh(m.received), limit = be64toh(m.limit);
        if (received > limit + NPF_POST_RING_SIZE) { // no receiver grants that: not a credit
            st.ignored++;
            continue;
        }
        st.credits++;
        st.lastHintUs = ntohl(m.hint_us);
        lastCreditNs = monotonicNs();
        window.take(ntohl(m.epoch), received, limit, st.sent);
    }
}

uint64_t Sender::Impl::room(uint64_t want, uint64_t nowNs) const noexcept
{
    uint64_t n = want;
    if (cfg.credits)
        n = std::min(n, window.room(st.sent));
    if (cfg.rate > 0 && startNs) {
        const double due = double(nowNs - startNs) * 1e-9 * cfg.rate + 1;
        n = due > double(st.sent) ? std::min<uint64_t>(n, static_cast<uint64_t>(due - double(st.sent))) : 0;
    }
    return n;
}

bool Sender::Impl::waitRoom(uint64_t deadlineNs) noexcept
{
    const uint64_t began = monotonicNs();
    const bool credit = cfg.credits && window.room(st.sent) == 0;
    if (credit)
        st.throttled++;
    for (;;) {
        const uint64_t now = monotonicNs();
        if (room(1, now))
            break;
        if (now >= deadlineNs) {
            if (credit)
                st.waitedNs += now - began;
            return false;
        }
        // Credit: until one comes (the socket turns readable). A rate's
        // next slot: that long.
        uint64_t waitNs = deadlineNs - now;
        if (cfg.rate > 0 && (!cfg.credits || window.room(st.sent))) {
            const double next = (double(st.sent) / cfg.rate) * 1e9 - double(now - startNs);
            waitNs = std::min<uint64_t>(waitNs, next > 0 ? static_cast<uint64_t>(next) : 0);
        } else if (window.heard() && lastCreditNs && now - lastCreditNs > uint64_t(cfg.timeout.count()) * 500'000) {
            // Half the timeout and not a word: what the receiver has not
            // seen of ours is lost; count from what it saw.
            if (const uint64_t lost = window.writeOff(st.sent)) {
                st.resynced += lost;
                continue;
            }
        }
        timespec ts{static_cast<time_t>(waitNs / 1'000'000'000), static_cast<long>(waitNs % 1'000'000'000)};
        pollfd p{sock.get(), POLLIN, 0};
        (void)::ppoll(&p, 1, &ts, nullptr);
        readCredits();
    }
    if (credit)
        st.waitedNs += monotonicNs() - began;
    return true;
}

int64_t Sender::send(std::span<const std::span<const uint8_t>> datagrams)
{
    Impl& s = *impl_;
    if (!s.startNs)
        s.startNs = monotonicNs();
    std::vector<mmsghdr> msgs(std::min(datagrams.size(), kBatch));
    std::vector<iovec> iov(msgs.size());
    size_t done = 0;
    uint64_t deadline = monotonicNs() + static_cast<uint64_t>(s.cfg.timeout.count()) * 1'000'000;
    while (done < datagrams.size()) {
        if (s.cfg.credits && s.window.room(s.st.sent) < kReadBelow)
            s.readCredits();
        uint64_t n = s.room(std::min(datagrams.size() - done, kBatch), monotonicNs());
        if (n == 0) {
            if (!s.waitRoom(deadline))
                return done ? static_cast<int64_t>(done) : -ETIMEDOUT;
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            const auto& d = datagrams[done + i];
            iov[i] = {const_cast<uint8_t*>(d.data()), d.size()};
            msgs[i] = {};
            msgs[i].msg_hdr.msg_name = &s.dest;
            msgs[i].msg_hdr.msg_namelen = s.destLen;
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        const int r = ::sendmmsg(s.sock.get(), msgs.data(), static_cast<unsigned>(n), 0);
        if (r < 0) {
            if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) {
                // The socket's buffer is full: wait for room, within the timeout.
                pollfd p{s.sock.get(), POLLOUT, 0};
                if (monotonicNs() >= deadline)
                    return done ? static_cast<int64_t>(done) : -ETIMEDOUT;
                (void)::poll(&p, 1, 1);
                continue;
            }
            const int e = errno;
            return done ? static_cast<int64_t>(done) : -e;
        }
        done += static_cast<size_t>(r);
        s.st.sent += static_cast<uint64_t>(r);
        deadline = monotonicNs() + static_cast<uint64_t>(s.cfg.timeout.count()) * 1'000'000;
    }
    return static_cast<int64_t>(done);
}

} // namespace npf
