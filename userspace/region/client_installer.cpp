#include "region/client_installer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "sys/error.h"
#include "sys/mmap_area.h"

namespace npf {

// What the pager and the installer's thread share; the thread holds it too,
// so a late job outlives the region.
struct ClientInstaller::Shared {
    enum class State { Idle, Posted, Done };

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
};

ClientInstaller::ClientInstaller(const Userfaultfd& client, size_t maxBytes, std::chrono::microseconds deadline,
                                 const std::string& who)
    : s_(std::make_shared<Shared>())
{
    Fd dup(::fcntl(client.fd(), F_DUPFD_CLOEXEC, 0));
    if (!dup)
        throwErrno("duplicate the userfaultfd of " + who);
    s_->uffd = Userfaultfd::adopt(std::move(dup), who);
    // Populated: the ioctl reads it from npfd's mm, and a fault there would
    // only slow the copy.
    s_->buffer = MmapArea::map(maxBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0,
                               "page images for " + who);
    s_->deadline = deadline;
    thread_ = std::thread(run, s_);
    ::pthread_setname_np(thread_.native_handle(), "npf-install");
}

ClientInstaller::~ClientInstaller()
{
    bool late;
    {
        std::lock_guard lk(s_->mu);
        s_->stop = true;
        late = s_->state == Shared::State::Posted;
    }
    s_->posted.notify_one();
    if (late)
        thread_.detach(); // stuck in the client's mm: it ends when the ioctl returns
    else
        thread_.join();
}

void ClientInstaller::run(std::shared_ptr<Shared> s) noexcept
{
    std::unique_lock lk(s->mu);
    for (;;) {
        s->posted.wait(lk, [&] { return s->stop || s->state == Shared::State::Posted; });
        if (s->state != Shared::State::Posted)
            return; // stopped, nothing to do
        lk.unlock();
        int64_t copied = 0;
        const long rc = s->uffd.copy(reinterpret_cast<void*>(s->dst), s->buffer.get(), s->len, &copied);
        lk.lock();
        s->rc = rc;
        s->copied = copied;
        s->state = Shared::State::Done;
        s->done.notify_one();
        if (s->stop)
            return;
    }
}

bool ClientInstaller::ready() const noexcept
{
    std::lock_guard lk(s_->mu);
    return !s_->disabled && !s_->late;
}

uint8_t* ClientInstaller::buffer() const noexcept
{
    return s_->buffer.as<uint8_t>();
}

long ClientInstaller::copy(uint64_t dst, size_t len, int64_t* copied) noexcept
{
    std::unique_lock lk(s_->mu);
    if (s_->late || s_->disabled || len > s_->buffer.size())
        return -EBUSY;
    s_->dst = dst;
    s_->len = len;
    s_->state = Shared::State::Posted;
    s_->posted.notify_one();
    if (!s_->done.wait_for(lk, s_->deadline, [&] { return s_->state == Shared::State::Done; })) {
        s_->late = true;
        *copied = 0;
        return -ETIMEDOUT;
    }
    s_->state = Shared::State::Idle;
    *copied = s_->copied;
    return s_->rc;
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
