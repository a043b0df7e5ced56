#include "sys/thread.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <cstring>

#include "sys/log.h"

namespace npf {

void pinThread(int cpu, const char* who) noexcept
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
        NPF_WARN("pinning %s to CPU %d: %s", who, cpu, strerror(rc));
}

namespace {
// struct sched_attr, first version (SCHED_ATTR_SIZE_VER0); the uapi
// header's clashes with glibc's struct sched_param.
struct SchedAttr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};
static_assert(sizeof(SchedAttr) == 48);
} // namespace

bool shortSlice(uint64_t ns) noexcept
{
    if (::sched_getscheduler(0) != SCHED_OTHER) // real-time, batch or idle: the caller's choice stands
        return false;
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, 0); // this thread's (Linux: per thread)
    if (nice == -1 && errno)
        return false;
    SchedAttr a{};
    a.size = sizeof(a);
    a.policy = SCHED_OTHER;
    a.nice = nice;
    a.runtime = ns;
    return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

} // namespace npf
