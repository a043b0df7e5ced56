#include "region/epoch.h"

#include <cerrno>

#include "sys/error.h"

namespace npf {

EpochDomain::EpochDomain() : slots_(new Slot[kMaxReaders]) {}

unsigned EpochDomain::registerReader()
{
    for (unsigned i = 0; i < kMaxReaders; ++i) {
        bool expected = false;
        if (slots_[i].used.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
            slots_[i].state.store(0, std::memory_order_release);
            return i;
        }
    }
    throwErrno(EBUSY, "register epoch reader: all " + std::to_string(kMaxReaders) + " slots taken");
}

void EpochDomain::unregisterReader(unsigned slot) noexcept
{
    slots_[slot].state.store(0, std::memory_order_release);
    slots_[slot].used.store(false, std::memory_order_release);
}

bool EpochDomain::passed(uint64_t epoch) const noexcept
{
    for (unsigned i = 0; i < kMaxReaders; ++i) {
        uint64_t s = slots_[i].state.load(std::memory_order_acquire);
        if (s != 0 && s < epoch)
            return false;
    }
    return true;
}

} // namespace npf
