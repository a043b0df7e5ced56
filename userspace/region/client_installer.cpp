#include "region/client_installer.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "sys/clock.h"
#include "sys/mmap_area.h"

namespace npf {

// What the pager and the installer's thread share; the thread holds it too,
// so a late job outlives the region.
struct ClientInstaller::Shared {
    // Idle -> Posted (the pager) -> Running (the thread, in the ioctl) ->
    // Done (the thread) -> Idle (the pager, or settled()); Posted ->
    // Cancelled (the pager: not started in time) -> Idle (the thread).
    enum class State { Idle, Posted, Running, Done, Cancelled };

    Userfaultfd uffd; // a duplicate of the client's
    MmapArea buffer;
    std::chrono::microseconds deadline;
    std::mutex mu;
    std::condition_variable posted, done;
    State state = State::Idle;
    bool late = false, stop = false, disabled = false;
    uint64_t dst = 0;
    size_t len = 0;
    long rc = 0;
    int64_t copied = 0;
    // When the thread came out of the ioctl: the job's end, whenever the
    // pager gets the CPU to see it (its own wake-up is not the client's).
    uint64_t endedNs = 0;
};

ClientInstaller::ClientInstaller(const Userfaultfd& client, size_t maxBytes, std::chrono::microseconds deadline,
                                 CoolDown coolDown, const std::string& who)
    : s_(std::make_shared<Shared>()), coolDown_(coolDown)
{
    s_->uffd = client.duplicate(who);
    // Faulted in as runs use it (most are a few pages): npfd's memory grows
    // with what its clients' installs use, not with batchPages per client.
    s_->buffer = MmapArea::map(maxBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0,
                               "page images for " + who);
    s_->deadline = deadline;
    thread_ = std::thread(run, s_);
    ::pthread_setname_np(thread_.native_handle(), "npf-install");
}

ClientInstaller::~ClientInstaller()
{
    bool idle;
    {
        std::lock_guard lk(s_->mu);
        s_->stop = true;
        idle = s_->state == Shared::State::Idle || s_->state == Shared::State::Done;
    }
    s_->posted.notify_one();
    if (idle)
        thread_.join();
    else
        thread_.detach(); // in the client's mm, or not yet round: it ends when it gets there
}

void ClientInstaller::run(std::shared_ptr<Shared> s) noexcept
{
    using State = Shared::State;
    std::unique_lock lk(s->mu);
    for (;;) {
        s->posted.wait(lk, [&] { return s->stop || s->state == State::Posted || s->state == State::Cancelled; });
        if (s->state == State::Cancelled) {
            s->state = State::Idle; // the pager gave up waiting for us to start
            continue;
        }
        if (s->state != State::Posted)
            return; // stopped, nothing to do
        s->state = State::Running;
        lk.unlock();
        int64_t copied = 0;
        const long rc = s->uffd.copy(reinterpret_cast<void*>(s->dst), s->buffer.get(), s->len, &copied);
        const uint64_t ended = monotonicNs();
        lk.lock();
        s->endedNs = ended;
        s->rc = rc;
        s->copied = copied;
        s->state = State::Done;
        s->done.notify_one();
        if (s->stop)
            return;
    }
}

bool ClientInstaller::ready() const noexcept
{
    if (!coolDown_.over(monotonicNs()))
        return false;
    std::lock_guard lk(s_->mu);
    return !s_->disabled && s_->state == Shared::State::Idle;
}

uint8_t* ClientInstaller::buffer() const noexcept
{
    return s_->buffer.as<uint8_t>();
}

long ClientInstaller::copy(uint64_t dst, size_t len, int64_t* copied, bool* slow) noexcept
{
    using State = Shared::State;
    *copied = 0;
    *slow = false;
    const uint64_t postedNs = monotonicNs();
    if (!coolDown_.over(postedNs))
        return -EBUSY;
    std::unique_lock lk(s_->mu);
    if (s_->state != State::Idle || s_->disabled || len > s_->buffer.size())
        return -EBUSY;
    s_->dst = dst;
    s_->len = len;
    s_->state = State::Posted;
    s_->posted.notify_one();
    const bool done = s_->done.wait_for(lk, s_->deadline, [&] { return s_->state == State::Done; });
    const uint64_t now = monotonicNs();
    if (done) {
        s_->state = State::Idle;
        *copied = s_->copied;
        const uint64_t took = s_->endedNs > postedNs ? s_->endedNs - postedNs : 0;
        *slow = coolDown_.ended(took, static_cast<uint64_t>(std::chrono::nanoseconds(s_->deadline).count()), now);
        return s_->rc;
    }
    coolDown_.missed(static_cast<uint64_t>(std::chrono::nanoseconds(s_->deadline).count()), now);
    if (s_->state == State::Posted) { // its thread did not get a CPU in time
        s_->state = State::Cancelled;
        return -ECANCELED;
    }
    s_->late = true; // Running: in the client's mm
    return -ETIMEDOUT;
}

bool ClientInstaller::settled() noexcept
{
    std::lock_guard lk(s_->mu);
    if (!s_->late || s_->state != Shared::State::Done)
        return false;
    s_->late = false;
    s_->state = Shared::State::Idle;
    return true;
}

void ClientInstaller::disable() noexcept
{
    std::lock_guard lk(s_->mu);
    s_->disabled = true;
}

} // namespace npf
