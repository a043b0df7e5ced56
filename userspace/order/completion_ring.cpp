#include "order/completion_ring.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "sys/clock.h"
#include "sys/error.h"

namespace npf {
namespace {

using Ref = std::atomic_ref<__u64>;
static_assert(Ref::is_always_lock_free, "ring cursors are shared across processes");

// The consumer's "I am about to sleep on the notifier" word. The ABI header has
// no field for it yet; it lives in the first padding word of the consumer's
// cache line (binary compatible with naming it in abi.h later).
__u64& waitWord(npf_completion_ring* h) noexcept { return h->waiting; }

void bump(std::atomic<uint64_t>& c, uint64_t n = 1) noexcept
{
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

} // namespace

size_t CompletionRing::mappingSize(uint32_t entries) noexcept
{
    const size_t bytes = sizeof(npf_completion_ring) + size_t(entries) * sizeof(npf_completion);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
}

CompletionRing::CompletionRing(Fd memfd, Fd notifyRead, Fd notifyWrite, MmapArea map, uint32_t size) noexcept
    : memfd_(std::move(memfd)), notifyRead_(std::move(notifyRead)), notifyWrite_(std::move(notifyWrite)),
      map_(std::move(map)), size_(size)
{
}

namespace {

// One byte per signal: the producer signals once per sleep of the consumer,
// so a page of buffer is plenty; a consumer that never drains it costs the
// service one page and EAGAIN, not a blocked thread.
bool notify(int fd) noexcept
{
    const char one = 1;
    return ::write(fd, &one, 1) == 1;
}

} // namespace

CompletionRing CompletionRing::create(uint32_t entries, const std::string& name)
{
    const std::string what = "completion ring " + name;
    if (entries < 2 || (entries & (entries - 1)))
        throwErrno(EINVAL, "create " + what + ": " + std::to_string(entries) +
                               " entries is not a power of two >= 2");
    Fd mfd(::memfd_create(("npf-cr-" + name).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!mfd)
        throwErrno("memfd_create for " + what);
    const size_t len = mappingSize(entries);
    checkErrno(::ftruncate(mfd.get(), static_cast<off_t>(len)), "size memfd of " + what);
    // A client that shrank the file would make the service's next write SIGBUS.
    checkErrno(::fcntl(mfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
               "seal memfd of " + what);
    int p[2];
    checkErrno(::pipe2(p, O_CLOEXEC | O_NONBLOCK), "pipe for the notifier of " + what);
    Fd rd(p[0]), wr(p[1]);
    (void)::fcntl(wr.get(), F_SETPIPE_SZ, static_cast<int>(sysconf(_SC_PAGESIZE))); // the least; best effort
    MmapArea map = MmapArea::map(len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd.get(), 0, what);
    auto* h = map.as<npf_completion_ring>();
    std::memset(h, 0, sizeof(*h));
    h->size = entries;
    h->magic = NPF_RING_MAGIC;
    h->version = NPF_RING_LAYOUT_VERSION;
    return CompletionRing(std::move(mfd), std::move(rd), std::move(wr), std::move(map), entries);
}

CompletionRing CompletionRing::attach(Fd memfd, Fd notifyFd, const std::string& name)
{
    const std::string what = "completion ring " + name;
    struct stat st{};
    checkErrno(::fstat(memfd.get(), &st), "stat memfd of " + what);
    if (static_cast<size_t>(st.st_size) < sizeof(npf_completion_ring))
        throwErrno(EINVAL, "attach " + what + ": file of " + std::to_string(st.st_size) +
                               " bytes is smaller than the ring header");
    // Only the page with the header first: size decides the full mapping.
    uint32_t entries;
    {
        MmapArea head = MmapArea::map(sizeof(npf_completion_ring), PROT_READ, MAP_SHARED,
                                      memfd.get(), 0, what + " header");
        const npf_completion_ring* h = head.as<npf_completion_ring>();
        if (h->magic != NPF_RING_MAGIC)
            throwErrno(EINVAL, "attach " + what + ": no completion ring header (magic " +
                                   std::to_string(h->magic) + ")");
        if (h->version != NPF_RING_LAYOUT_VERSION)
            throwErrno(EPROTO, "attach " + what + ": created for npf ring layout " + std::to_string(h->version) +
                                   ", this is layout " + std::to_string(NPF_RING_LAYOUT_VERSION));
        entries = h->size;
    }
    if (entries < 2 || (entries & (entries - 1)) ||
        mappingSize(entries) > static_cast<size_t>(st.st_size))
        throwErrno(EINVAL, "attach " + what + ": header says " + std::to_string(entries) +
                               " entries, file has " + std::to_string(st.st_size) +
                               " bytes: not a completion ring");
    struct stat nst{};
    const int fl = ::fcntl(notifyFd.get(), F_GETFL);
    if (fl < 0 || ::fstat(notifyFd.get(), &nst) != 0 || !S_ISFIFO(nst.st_mode) || (fl & O_ACCMODE) != O_RDONLY)
        throwErrno(EINVAL, "attach " + what + ": its notifier is not the read end of a pipe");
    if (::fcntl(notifyFd.get(), F_SETFL, fl | O_NONBLOCK) < 0)
        throwErrno("make the notifier of " + what + " non-blocking");
    MmapArea map = MmapArea::map(mappingSize(entries), PROT_READ | PROT_WRITE, MAP_SHARED,
                                 memfd.get(), 0, what);
    return CompletionRing(std::move(memfd), std::move(notifyFd), Fd(), std::move(map), entries);
}

CompletionProducer::CompletionProducer(CompletionRing& ring) noexcept
    : ring_(ring), prod_(Ref(ring.hdr()->prod).load(std::memory_order_acquire))
{
}

CompletionProducerStats CompletionProducer::stats() const noexcept
{
    auto ld = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
    return {ld(pushed_), ld(full_), ld(wakeups_), ld(badCons_)};
}

size_t CompletionProducer::room() noexcept
{
    const uint64_t cons = Ref(ring_.hdr()->cons).load(std::memory_order_acquire);
    const uint64_t used = prod_ - cons;
    if (used > ring_.size_) { // consumer wrote a cursor it cannot have reached
        bump(badCons_);
        return 0;
    }
    return ring_.size_ - used;
}

size_t CompletionProducer::append(std::span<const npf_completion> batch) noexcept
{
    const size_t n = std::min(batch.size(), room());
    if (n < batch.size())
        bump(full_);
    if (!n)
        return 0;
    npf_completion* e = ring_.entries();
    const uint64_t mask = ring_.size_ - 1;
    for (size_t i = 0; i < n; ++i)
        e[(prod_ + i) & mask] = batch[i];
    prod_ += n;
    bump(pushed_, n);
    Ref(ring_.hdr()->prod).store(prod_, std::memory_order_seq_cst);
    return n;
}

void CompletionProducer::wakeIfWaiting() noexcept
{
    // Dekker pairing with wait(): the producer stores prod (append) then
    // loads the wait word, the consumer stores the wait word then loads
    // prod, all four seq_cst, so in their single total order at least one
    // side sees the other's store: either the consumer sees the entries and
    // does not sleep, or we see it waiting and signal. No wakeup is lost.
    // The exchange makes one signal per sleep.
    Ref w(waitWord(ring_.hdr()));
    if (w.load(std::memory_order_seq_cst) && w.exchange(0, std::memory_order_relaxed)) {
        if (notify(ring_.notifyWrite_.get()))
            bump(wakeups_);
    }
}

bool CompletionProducer::consumerWaiting() const noexcept
{
    return Ref(waitWord(ring_.hdr())).load(std::memory_order_relaxed) != 0;
}

void CompletionProducer::wake() noexcept { (void)notify(ring_.notifyWrite_.get()); }

CompletionConsumer::CompletionConsumer(CompletionRing& ring) noexcept
    : ring_(ring), cons_(Ref(ring.hdr()->cons).load(std::memory_order_acquire))
{
}

size_t CompletionConsumer::ready(std::memory_order order) noexcept
{
    const uint64_t prod = Ref(ring_.hdr()->prod).load(order);
    const uint64_t avail = prod - cons_;
    if (avail > ring_.size_) {
        bump(badProd_);
        return 0;
    }
    return avail;
}

size_t CompletionConsumer::poll(size_t max, npf_completion* out) noexcept
{
    const size_t n = std::min(ready(), max);
    if (!n)
        return 0;
    const npf_completion* e = ring_.entries();
    const uint64_t mask = ring_.size_ - 1;
    for (size_t i = 0; i < n; ++i)
        out[i] = e[(cons_ + i) & mask];
    cons_ += n;
    Ref(ring_.hdr()->cons).store(cons_, std::memory_order_release);
    return n;
}

int CompletionConsumer::arm() noexcept
{
    // Signals sent before this point answered earlier arms or waits: drop
    // them, so the fd is readable again only for the one asked for now. A
    // read of 0 is end of file: every write end is closed.
    bool producerGone = false;
    char drain[64];
    for (;;) {
        const ssize_t r = ::read(ring_.notifyFd(), drain, sizeof(drain));
        if (r == 0)
            producerGone = true;
        if (r != static_cast<ssize_t>(sizeof(drain)))
            break;
    }
    const uint64_t badBefore = badProd();
    if (size_t n = ready())
        return static_cast<int>(std::min<size_t>(n, INT32_MAX));
    if (badProd() != badBefore)
        return -EPROTO;
    if (producerGone)
        return -EPIPE;
    Ref w(waitWord(ring_.hdr()));
    w.store(1, std::memory_order_seq_cst); // see write()
    if (size_t n = ready(std::memory_order_seq_cst)) {
        w.store(0, std::memory_order_relaxed); // a signal already sent is dropped by the next arm
        return static_cast<int>(std::min<size_t>(n, INT32_MAX));
    }
    return 0;
}

int CompletionConsumer::wait(std::chrono::milliseconds timeout, int hangupFd) noexcept
{
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + timeout;
    Ref w(waitWord(ring_.hdr()));
    for (;;) {
        const uint64_t badBefore = badProd();
        if (size_t n = ready())
            return static_cast<int>(std::min<size_t>(n, INT32_MAX));
        if (badProd() != badBefore)
            return -EPROTO;
        w.store(1, std::memory_order_seq_cst); // see write()
        if (size_t n = ready(std::memory_order_seq_cst)) {
            w.store(0, std::memory_order_relaxed);
            return static_cast<int>(std::min<size_t>(n, INT32_MAX));
        }
        const int ms = pollTimeoutMs(timeout, deadline);
        pollfd p[2] = {{ring_.notifyFd(), POLLIN, 0}, {hangupFd, 0, 0}};
        const int rc = ::poll(p, hangupFd >= 0 ? 2 : 1, ms);
        const int err = errno;
        w.store(0, std::memory_order_relaxed);
        if (hangupFd >= 0 && (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) && !ready())
            return -EPIPE;
        if (rc > 0) {
            char drain[64];
            [[maybe_unused]] ssize_t r = ::read(ring_.notifyFd(), drain, sizeof(drain)); // EAGAIN: raced, fine
        } else if (rc < 0 && err != EINTR) {
            return -err;
        }
        if (rc == 0 || (timeout.count() >= 0 && Clock::now() >= deadline)) {
            const size_t n = ready();
            return static_cast<int>(std::min<size_t>(n, INT32_MAX));
        }
    }
}

} // namespace npf
