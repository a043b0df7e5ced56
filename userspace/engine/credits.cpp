#include "engine/credits.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "engine/flow_table.h"
#include "engine/served_flow.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/netns.h"

namespace npf {
namespace {

uint16_t be16(const uint8_t* p) noexcept { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// The peer's bytes mixed a word at a time (it runs per datagram), never 0
// (0 means no peer). Two peers with one tag would be taken for one: credits
// would go on to the first, which sent datagrams of the flow too.
uint64_t tagOf(const CreditPeer& p) noexcept
{
    uint64_t w[4];
    std::memcpy(w, p.addr.data(), 16);
    std::memcpy(w + 2, p.local.data(), 16);
    uint64_t h = (uint64_t(p.family) << 16 | p.port) * 0x9e3779b97f4a7c15ull;
    for (uint64_t x : w)
        h = (h ^ x) * 0xff51afd7ed558ccdull, h ^= h >> 29;
    return h ? h : 1;
}

} // namespace

bool peerOf(const xsk::RxPacket& p, CreditPeer* out) noexcept
{
    constexpr uint32_t kEth = 14, kVlan = 4, kUdp = 8, kIp4 = 20, kIp6 = 40;
    const uint32_t off = p.meta.payload_off;
    if (off < kEth + kIp4 + kUdp)
        return false;
    const uint8_t* pkt = p.payload - off;
    uint32_t l3 = kEth;
    uint16_t proto = be16(pkt + 12);
    if (proto == 0x8100 || proto == 0x88a8) {
        proto = be16(pkt + 16);
        l3 += kVlan;
    }
    CreditPeer c;
    if (proto == 0x0800 && off >= l3 + kIp4 + kUdp) {
        c.family = NPF_FAMILY_IPV4;
        std::memcpy(c.addr.data(), pkt + l3 + 12, 4);
        std::memcpy(c.local.data(), pkt + l3 + 16, 4);
    } else if (proto == 0x86dd && off >= l3 + kIp6 + kUdp) {
        c.family = NPF_FAMILY_IPV6;
        std::memcpy(c.addr.data(), pkt + l3 + 8, 16);
        std::memcpy(c.local.data(), pkt + l3 + 24, 16);
    } else {
        return false;
    }
    std::memcpy(&c.port, p.payload - kUdp, 2); // the UDP source port, as it is on the wire
    *out = c;
    return true;
}

void FlowCredits::kickAt(uint64_t seq) noexcept
{
    if (seq < kickSeq_.load(std::memory_order_relaxed) || kickSeq_.exchange(kNoKick) == kNoKick || !kick_)
        return;
    const uint64_t one = 1;
    if (::write(kick_->get(), &one, sizeof one) < 0) {
        // Full (2^64 - 2 kicks unread): the thread has plenty to wake for.
    }
}

void FlowCredits::see(const xsk::RxPacket& p, uint64_t seq) noexcept
{
    CreditPeer peer;
    if (!peerOf(p, &peer))
        return;
    kickAt(seq);
    const uint64_t t = tagOf(peer);
    auto lowerBase = [&] {
        uint64_t b = base_.load(std::memory_order_relaxed);
        while (seq < b && !base_.compare_exchange_weak(b, seq, std::memory_order_relaxed))
            ;
    };
    if (t == tag_.load(std::memory_order_acquire)) {
        lowerBase();
        return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (t == tag_.load(std::memory_order_relaxed)) {
        lowerBase();
        return;
    }
    if (peer_.family && seq < since_)
        return; // a datagram of an earlier sender, handled late
    peer_ = peer;
    since_ = seq;
    epoch_++;
    kickSeq_.store(seq + NPF_CREDIT_EVERY, std::memory_order_relaxed);
    base_.store(seq, std::memory_order_relaxed);
    tag_.store(t, std::memory_order_release);
}

FlowCredits::Sender FlowCredits::sender() const
{
    std::lock_guard<std::mutex> lock(mu_);
    return {peer_, epoch_, base_.load(std::memory_order_relaxed)};
}

CreditSender::CreditSender(FlowTable& flows, int nsFd, const std::string& ifname, EpochDomain& epochs)
    : flows_(flows), ifname_(ifname), epochs_(epochs)
{
    {
        NetnsScope in(nsFd, "of " + ifname);
        v4_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!v4_)
            throw std::system_error(errno, std::generic_category(), "credits: a UDP socket on " + ifname);
        v6_.reset(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)); // none without IPv6: fine
    }
    stopFd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    kick_ = std::make_shared<const Fd>(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stopFd_ || !*kick_)
        throw std::system_error(errno, std::generic_category(), "credits: eventfd");
    thread_ = std::thread([this] { loop(); });
}

CreditSender::~CreditSender()
{
    const uint64_t one = 1;
    if (::write(stopFd_.get(), &one, sizeof one) < 0) {
        // An eventfd write fails only when its counter would overflow.
    }
    if (thread_.joinable())
        thread_.join();
}

void CreditSender::loop() noexcept
{
    pthread_setname_np(pthread_self(), "npf-credit");
    EpochDomain::Reader reader(epochs_);
    uint64_t ns = uint64_t(kIdleMs) * 1'000'000;
    for (;;) {
        timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
        pollfd pfd[2] = {{stopFd_.get(), POLLIN, 0}, {kick_->get(), POLLIN, 0}};
        if (::ppoll(pfd, 2, &ts, nullptr) > 0) {
            if (pfd[0].revents)
                return;
            uint64_t kicks;
            if (::read(kick_->get(), &kicks, sizeof kicks) < 0) {
                // Read by nobody else: it was readable.
            }
        }
        reader.enter();
        ns = tick(monotonicNs());
        reader.exit();
        if (!ns)
            ns = uint64_t(kIdleMs) * 1'000'000;
    }
}

uint64_t CreditSender::tick(uint64_t nowNs) noexcept
{
    uint64_t next = 0;
    flows_.forEach([&](ServedFlow& f) {
        if (!f.credits)
            return;
        if (const uint64_t ns = tickFlow(f, *f.credits, nowNs))
            next = next ? std::min(next, ns) : ns;
    });
    return next;
}

bool CreditSender::takeToken(uint64_t nowNs) noexcept
{
    if (tokensNs_)
        tokens_ = std::min<double>(kMaxPerSecond / 10.0, tokens_ + (nowNs - tokensNs_) * 1e-9 * kMaxPerSecond);
    tokensNs_ = nowNs;
    if (tokens_ < 1)
        return false;
    tokens_ -= 1;
    return true;
}

uint64_t CreditSender::tickFlow(ServedFlow& f, FlowCredits& c, uint64_t nowNs) noexcept
{
    const FlowCredits::Sender s = c.sender();
    if (!s.peer.family)
        return 0;
    constexpr uint64_t kActiveNs = 1'000'000'000; // a flow is looked at this long after its last change
    const uint64_t intervalNs = std::max<uint64_t>(1000, uint64_t(c.cfg.interval.count()) * 1000);
    const uint64_t cons = f.posts.consumed(), prod = f.posts.published();
    if (cons != c.lastCons_ || prod != c.lastProd_ || !c.activeNs_)
        c.lastCons_ = cons, c.lastProd_ = prod, c.activeNs_ = nowNs;
    if (nowNs - c.activeNs_ >= kActiveNs)
        return 0;
    if (nowNs - c.rateNs_ >= 200'000 || !c.rateNs_) { // the arrival rate over >= 200 us
        if (c.rateNs_ && cons >= c.rateCons_) {
            const double r = double(cons - c.rateCons_) / double(nowNs - c.rateNs_);
            c.consPerNs_ = c.consPerNs_ ? 0.5 * c.consPerNs_ + 0.5 * r : r;
        }
        c.rateCons_ = cons, c.rateNs_ = nowNs;
    }
    // prod is the application's (an npfd client's: anything): bounded by
    // what a ring can hold ahead of cons.
    const uint64_t limitSeq = std::clamp<uint64_t>(prod, cons, cons + NPF_POST_RING_SIZE);
    const bool newEpoch = s.epoch != c.grantedEpoch_;
    if (newEpoch) {
        c.grantedEpoch_ = s.epoch;
        c.granted_ = 0;
    }
    const uint64_t limit = limitSeq > s.base ? limitSeq - s.base : 0;
    const uint64_t received = cons > s.base ? cons - s.base : 0;
    const uint64_t grow = limit > c.granted_ ? limit - c.granted_ : 0;
    const bool usedUp = received >= c.granted_;
    // Completion progress: how long until the application can post more.
    const uint64_t head = f.seq.head();
    if (c.lastHeadNs_ && head > c.lastHead_) {
        const double per = double(nowNs - c.lastHeadNs_) / double(head - c.lastHead_);
        c.nsPerCompletion_ = c.nsPerCompletion_ ? 0.75 * c.nsPerCompletion_ + 0.25 * per : per;
    }
    if (head != c.lastHead_ || !c.lastHeadNs_)
        c.lastHead_ = head, c.lastHeadNs_ = nowNs;

    // When to look again: a quarter of the time the sender needs for what
    // it has left, within [interval, kMaxTickNs].
    const uint64_t left = c.granted_ > received ? c.granted_ - received : 0;
    const uint64_t again = std::clamp<uint64_t>(
        c.consPerNs_ > 0 ? static_cast<uint64_t>(double(left) / c.consPerNs_ / 4) : intervalNs, intervalNs,
        std::max(intervalNs, kMaxTickNs));
    if (!grow || (grow < c.cfg.step && !usedUp && !newEpoch))
        return again;
    if (c.lastNs_ && nowNs - c.lastNs_ < intervalNs)
        return intervalNs - (nowNs - c.lastNs_);
    const uint64_t took = cons - c.consAtOpen_;
    const uint64_t sent = c.sent.load(std::memory_order_relaxed);
    if (sent >= took / NPF_CREDIT_EVERY || !takeToken(nowNs)) {
        if (!c.withheldNoted_)
            c.withheld.fetch_add(1, std::memory_order_relaxed);
        c.withheldNoted_ = true;
        return intervalNs;
    }
    const uint64_t pending = cons > head ? cons - head : 0;
    const double hintUs = std::min(1e6, pending * c.nsPerCompletion_ / 1000);
    npf_credit m{};
    m.magic = htonl(NPF_CREDIT_MAGIC);
    m.version = NPF_CREDIT_VERSION;
    m.port = htons(f.spec.port);
    m.epoch = htonl(s.epoch);
    m.hint_us = htonl(static_cast<uint32_t>(hintUs));
    m.received = htobe64(received);
    m.limit = htobe64(limit);
    if (!send(s.peer, m))
        return intervalNs;
    if (usedUp && c.granted_ && !newEpoch)
        c.waits.fetch_add(1, std::memory_order_relaxed);
    c.granted_ = limit;
    c.lastNs_ = nowNs;
    c.withheldNoted_ = false;
    c.sent.fetch_add(1, std::memory_order_relaxed);
    c.limit.store(limit, std::memory_order_relaxed);
    return intervalNs;
}

// From the address the datagrams went to (IP_PKTINFO / IPV6_PKTINFO: the
// kernel checks it is local) to where they came from.
bool CreditSender::send(const CreditPeer& to, const npf_credit& msg) noexcept
{
    const bool v4 = to.family == NPF_FAMILY_IPV4;
    const int fd = v4 ? v4_.get() : v6_.get();
    if (fd < 0)
        return false;
    // The destination and the source's control message, of either family.
    union {
        sockaddr_in a4;
        sockaddr_in6 a6;
    } dst{};
    union {
        in_pktinfo p4;
        in6_pktinfo p6;
    } src{};
    if (v4) {
        dst.a4.sin_family = AF_INET;
        dst.a4.sin_port = to.port;
        std::memcpy(&dst.a4.sin_addr, to.addr.data(), 4);
        std::memcpy(&src.p4.ipi_spec_dst, to.local.data(), 4);
    } else {
        dst.a6.sin6_family = AF_INET6;
        dst.a6.sin6_port = to.port;
        std::memcpy(&dst.a6.sin6_addr, to.addr.data(), 16);
        std::memcpy(&src.p6.ipi6_addr, to.local.data(), 16);
    }
    const size_t srcLen = v4 ? sizeof src.p4 : sizeof src.p6;
    iovec iov{const_cast<npf_credit*>(&msg), sizeof msg};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
    msghdr mh{};
    mh.msg_name = &dst;
    mh.msg_namelen = v4 ? sizeof dst.a4 : sizeof dst.a6;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = CMSG_SPACE(srcLen);
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = v4 ? IPPROTO_IP : IPPROTO_IPV6;
    cm->cmsg_type = v4 ? IP_PKTINFO : IPV6_PKTINFO;
    cm->cmsg_len = CMSG_LEN(srcLen);
    std::memcpy(CMSG_DATA(cm), &src, srcLen);
    if (::sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        NPF_WARN_RL("npf credits on %s: sending a credit: %s", ifname_.c_str(), strerror(errno));
        return false;
    }
    return true;
}

} // namespace npf
