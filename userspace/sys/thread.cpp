#include "sys/thread.h"

#include <pthread.h>
#include <sched.h>

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

} // namespace npf
