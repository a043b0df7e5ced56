#include "engine/grace_period.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "sys/log.h"

namespace npf {

// Stand-in for an RCU grace period where membarrier cannot give one.
constexpr std::chrono::milliseconds kFallback{1000};

GracePeriods::GracePeriods(std::function<void()> onDone) : onDone_(std::move(onDone)), thread_([this] { loop(); })
{
}

GracePeriods::~GracePeriods()
{
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

uint64_t GracePeriods::request()
{
    uint64_t ticket;
    {
        std::lock_guard<std::mutex> lock(mu_);
        ticket = ++requested_;
    }
    cv_.notify_one();
    return ticket;
}

void GracePeriods::loop() noexcept
{
    pthread_setname_np(pthread_self(), "npf-barrier");
    bool warned = false;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || requested_ != done_.load(std::memory_order_relaxed); });
        if (stop_)
            return;
        const uint64_t want = requested_;
        lock.unlock();
        if (::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) {
            if (!warned)
                NPF_WARN("membarrier(MEMBARRIER_CMD_GLOBAL): %s; a missing datagram completes LOST after %llu ms "
                         "instead of on proof",
                         strerror(errno), static_cast<unsigned long long>(kFallback.count()));
            warned = true;
            std::this_thread::sleep_for(kFallback);
        }
        lock.lock();
        done_.store(want, std::memory_order_release);
        onDone_();
    }
}

} // namespace npf
